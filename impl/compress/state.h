// Per-tensor compression state kept in a context, keyed by the call's name: the
// error-feedback residual, random-k's step counter and CHOCO's public copies. Entries
// are registered on the caller's thread (so a name reused for another tensor fails at
// the call) and their buffers are touched only by the executing operation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "impl/common/dtype.h"
#include "impl/compress/codec.h"

namespace starling::compress {

enum class Use : uint8_t { kAllreduce = 0, kChoco = 1 };

struct TensorState {
  // Identity: a later call under the same name must match all of these.
  Use use = Use::kAllreduce;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  Kind kind = Kind::kNone;
  size_t k = 0;
  std::vector<int> sources;  // CHOCO: in-neighbors, ascending

  // Execution-side buffers (allocated on first run).
  uint64_t step = 0;                        // calls run under this name
  std::vector<double> residual;             // error feedback
  std::vector<double> self_copy;            // CHOCO: x_hat of this rank
  std::vector<std::vector<double>> copies;  // CHOCO: x_hat of each source
};

class StateStore {
 public:
  // The state for `name`, created on first use. Throws kInvalidArgument naming the
  // difference when the name is already used with another identity.
  std::shared_ptr<TensorState> Register(const std::string& name, const TensorState& identity);
  // Drops `name`'s state (every name when `all`).
  void Reset(const std::string& name, bool all);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<TensorState>> states_;
};

}  // namespace starling::compress
