// What every benchmark family shares: the Starling context, MPI rank/size, buffers and
// the time budget per comparison.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <starling/starling.h>

#include "bench_util.h"

namespace bench {

struct BenchContext {
  starling_context_t ctx = nullptr;
  int rank = 0;
  int size = 1;
  double budget = 0.4;
  std::vector<float> a, b;  // max_bytes each
};

inline void Check(starling_status_t status, const char* what) {
  if (status != STARLING_SUCCESS) {
    std::fprintf(stderr, "%s failed: %s\n", what, starling_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

inline DLTensor Tensor(float* data, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

// The raw side's combine: out = self * x + sum_j w * r_j in one vectorizable pass, as
// a careful MPI programmer writes it for small in-degrees.
void Combine(float* __restrict out, const float* __restrict x, const std::vector<float*>& r, float self, float w,
             size_t n);

// A rank's neighbors: where it sends and where it receives from.
struct Peers {
  std::vector<int> send, recv;
};
// The context's static topology, as starling_in_neighbors / starling_out_neighbors say.
Peers StaticPeers(starling_context_t ctx);
// The raw-MPI neighbor average of `count` floats of x into out (Irecv into scratch[j]
// from each in-neighbor, Isend to each out-neighbor, Waitall, Combine); uniform: every
// weight 1 / (in-degree + 1), else 0.5. Shared by the host and the staged GPU references.
void RawNeighborAverage(const Peers& peers, float* x, float* out, std::vector<std::vector<float>>& scratch, int count,
                        bool uniform);

// The families: each runs its comparisons for every size and returns the rows.
std::vector<Row> RunCollectives(BenchContext& b, const std::string& op, const std::vector<size_t>& sizes);
// reduce_scatter, reduce_scatterv, alltoall, alltoallv (bench_scatter.cc).
std::vector<Row> RunScatter(BenchContext& b, const std::string& op, const std::vector<size_t>& sizes);
std::vector<Row> RunNeighbor(BenchContext& b, const std::string& variant, const std::vector<size_t>& sizes);
std::vector<Row> RunFusion(BenchContext& b);
std::vector<Row> RunWindows(BenchContext& b, const std::string& op, const std::vector<size_t>& sizes);

}  // namespace bench
