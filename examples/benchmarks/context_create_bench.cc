// Time to create (and destroy) a context, median of --reps, the slowest rank per
// repetition: the cost of the shared-memory probe is the difference between runs with
// STARLING_SHM=1 and STARLING_SHM=0 (docs/concepts/execution-model.md, "Ranks on one host").
//   mpirun -n 4 build/examples/benchmarks/context_create_bench --reps 200
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "starling/starling.h"

int main(int argc, char** argv) {
  int reps = 100;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // kept across contexts
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<double> create_us, destroy_us;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    starling_context_t ctx = nullptr;
    if (starling_context_create(nullptr, &ctx) != STARLING_SUCCESS) {
      std::fprintf(stderr, "rank %d: create failed: %s\n", rank, starling_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const auto t1 = std::chrono::steady_clock::now();
    starling_context_destroy(ctx);
    const auto t2 = std::chrono::steady_clock::now();
    double times[2] = {std::chrono::duration<double, std::micro>(t1 - t0).count(),
                       std::chrono::duration<double, std::micro>(t2 - t1).count()};
    MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    create_us.push_back(times[0]);
    destroy_us.push_back(times[1]);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (rank == 0) {
    const char* shm = std::getenv("STARLING_SHM");
    std::printf("ranks %d  STARLING_SHM=%s  create median %.0f us (min %.0f)  destroy median %.0f us  (%d reps)\n",
                size, shm ? shm : "1", median(create_us), *std::min_element(create_us.begin(), create_us.end()),
                median(destroy_us), reps);
  }
  MPI_Finalize();
  return 0;
}
