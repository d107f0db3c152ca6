// An operation queued on a context's engine. Ops are built and validated on the
// caller's thread, then executed in submission order by whoever holds the engine's
// execution lock (the progress thread, or a caller waiting for it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "impl/common/error.h"
#include "impl/runtime/request.h"

namespace starling::runtime {

class Context;

// A numbered operation's numbers on its context (first..last: a fused group takes
// several) and kind (an ops::OpKind; 0: unknown).
struct Numbered {
  uint64_t first = 0, last = 0;
  uint8_t kind = 0;
};

class Op {
 public:
  virtual ~Op() = default;
  // Performs the operation; throws starling::Error on failure.
  virtual void Run(Context& context) = 0;
  // "allreduce 'grad.w' (sum, float32[1024])", for messages and the timeline.
  virtual std::string Describe() const = 0;
  // Describe(), evaluated only if a message needs it.
  LazyText Label() const {
    return [this] { return Describe(); };
  }
  // The timeline lane: the description up to its details ("allreduce 'grad.w'").
  std::string TimelineLane() const {
    const std::string text = Describe();
    return text.substr(0, text.find(" ("));
  }

  // --- fusion (optional) ---
  // Operations with equal non-empty keys, queued back to back, may run as one group
  // through RunGroup, up to STARLING_FUSION_THRESHOLD bytes in total.
  virtual const std::string& fusion_key() const {
    static const std::string kNone;
    return kNone;
  }
  virtual size_t fusion_bytes() const { return 0; }
  // Runs `group` (this op first, all with this op's key). Throwing fails the whole
  // group; a failure of one member goes into its `failure` instead.
  virtual void RunGroup(Context& context, const std::vector<Op*>& group) { Run(context); }

  std::optional<Error> failure;
  std::shared_ptr<Request> request = std::make_shared<Request>();
};

}  // namespace starling::runtime
