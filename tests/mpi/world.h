// This process's rank and the job's size in MPI_COMM_WORLD, for tests that compare what a
// context reports with what MPI says.
#pragma once

#include <mpi.h>

namespace starling_test {

inline int WorldRank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int WorldSize() {
  int s;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace starling_test
