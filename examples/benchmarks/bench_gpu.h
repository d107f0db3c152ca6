// starling_bench --device cuda: Starling's operations on CUDA tensors against
// hand-written GPU code moving the same bytes, in the same run (bench_gpu.cc says how).
#pragma once

#include <string>
#include <vector>

#include "bench_context.h"

namespace bench {

struct GpuOptions {
  // allreduce, broadcast, neighbor_ring, neighbor_exp2, combine (GpuFamilies()).
  std::vector<std::string> ops;
  // The staged path's chunk, as the context reads it (STARLING_GPU_CHUNK_BYTES, else
  // 4 MiB): the hand-written staging uses the same, so both pipelines are alike.
  size_t chunk_bytes = size_t{4} << 20;
  std::string csv;
};

// The families of a --device cuda run, in order (the default --ops).
const std::vector<std::string>& GpuFamilies();

// Runs the GPU comparisons on b.ctx (created after STARLING_GPU_PATH was set) for every
// size and prints the table, the path that ran and the targets. Returns the exit code:
// 1 with the reason on stderr when there is no usable device plugin, device or path
// (every rank returns the same code).
int RunGpu(BenchContext& b, const GpuOptions& options, const std::vector<size_t>& sizes);

}  // namespace bench
