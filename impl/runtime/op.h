// An operation queued on a context's engine. Ops are built and validated on the
// caller's thread, then executed in submission order by whoever holds the engine's
// execution lock (the progress thread, or a caller waiting for it).
#pragma once

#include <memory>
#include <string>

#include "impl/runtime/request.h"

namespace starling::runtime {

class Context;

class Op {
 public:
  virtual ~Op() = default;
  // Performs the operation; throws starling::Error on failure.
  virtual void Run(Context& context) = 0;
  // "allreduce 'grad.w' (sum, float32[1024])", for messages and the timeline.
  virtual std::string Describe() const = 0;

  std::shared_ptr<Request> request = std::make_shared<Request>();
};

}  // namespace starling::runtime
