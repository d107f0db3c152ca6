// What the fault-tolerance test programs (ulfm_program, grow_program) share: a
// monotonic clock the drivers compare across processes, a float64 tensor, and checks
// that throw Failure with Starling's last error.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <starling/starling.h>

namespace fault_support {

inline double Mono() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Tensor {
  std::vector<double> data;
  int64_t shape[1];
  DLTensor t{};
  explicit Tensor(size_t n, double value = 0.0) : data(n, value) {
    shape[0] = static_cast<int64_t>(n);
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 64, 1};
    t.shape = shape;
  }
  void Fill(double v) { std::fill(data.begin(), data.end(), v); }
};

struct Failure {
  std::string reason;
};

inline void Expect(bool ok, const std::string& what) {
  if (!ok) throw Failure{what + " (last error: " + starling_last_error() + ")"};
}

inline std::vector<int> InNeighbors(starling_context_t ctx) {
  int ranks[64];
  int count = 0;
  Expect(starling_in_neighbors(ctx, ranks, 64, &count) == STARLING_SUCCESS, "in_neighbors");
  return std::vector<int>(ranks, ranks + count);
}

}  // namespace fault_support
