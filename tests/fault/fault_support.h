// What the fault-tolerance test programs (ulfm_program, grow_program) share: a
// monotonic clock the drivers compare across processes, a float64 tensor, and checks
// that throw Failure with Starling's last error.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include <starling/starling.h>

namespace fault_support {

inline double Mono() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// A 1-D CPU tensor of T (a floating or signed integer type) that owns its data.
template <typename T>
struct VectorTensor {
  std::vector<T> data;
  int64_t shape[1];
  DLTensor t{};
  explicit VectorTensor(size_t n, T value = T{}) : data(n, value) {
    shape[0] = static_cast<int64_t>(n);
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {static_cast<uint8_t>(std::is_floating_point<T>::value ? kDLFloat : kDLInt),
               static_cast<uint8_t>(8 * sizeof(T)), 1};
    t.shape = shape;
  }
  void Fill(T v) { std::fill(data.begin(), data.end(), v); }
};
using Tensor = VectorTensor<double>;

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

// After a repair or grow (`after`) the shared-memory probe ran again over the new ranks:
// with every rank on this host, the config string's line names them all by their new
// numbers (on, or off with STARLING_SHM=0); never the old result, never "unknown".
inline void ExpectShmProbedAgain(starling_context_t ctx, const std::string& after) {
  int size = 0, local = 0;
  Expect(starling_size(ctx, &size) == STARLING_SUCCESS && starling_local_size(ctx, &local) == STARLING_SUCCESS,
         "size, local_size");
  const std::string config = starling_config_string();
  const char* shm = std::getenv("STARLING_SHM");
  std::string expected = "shm: ";
  if (shm != nullptr && std::string(shm) == "0") expected = "shm: off (STARLING_SHM=0)";
  else if (local == size && size >= 2) expected = "shm: on (ranks 0-" + std::to_string(size - 1) + " on host ";
  Expect(config.find(expected) != std::string::npos && config.find("shm: unknown") == std::string::npos,
         "the config string's shm line after " + after + " (expected '" + expected + "'): " + config);
}

}  // namespace fault_support
