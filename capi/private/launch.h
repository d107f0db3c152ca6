// The common shape of every operation entry point: build the op on the caller's
// thread (validating everything), then run it to completion (blocking form) or queue
// it and hand back a request (nonblocking form).
#pragma once

#include <string>

#include "capi/private/api.h"
#include "capi/private/objects.h"
#include "impl/common/dtype.h"
#include "impl/common/tensor.h"
#include "impl/device/staging.h"

namespace starling::capi {

template <typename Make>
starling_status_t Launch(starling_context_t ctx, starling_request_t* req, bool nonblocking, Make make) {
  STARLING_API_BEGIN();
  if (nonblocking) {
    CheckOut(req, "req");
    *req = nullptr;
  }
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  std::unique_ptr<runtime::Op> op = make(*context);
  if (nonblocking) {
    RunNonblocking(context, std::move(op), req);
  } else {
    RunBlocking(*context, std::move(op));
  }
  STARLING_API_END();
}

// Tensor arguments of an operation, validated here and routed by device::Route.
using Views = std::vector<TensorView>;
inline device::TensorArg In(const DLTensor* t, const char* name = "in") {
  return {ViewOf(t, name), device::Role::kIn, name};
}
inline device::TensorArg Out(const DLTensor* t, const char* name = "out") {
  return {ViewOf(t, name), device::Role::kOut, name};
}
inline device::TensorArg InOut(const DLTensor* t, const char* name) {
  return {ViewOf(t, name), device::Role::kInOut, name};
}
inline device::TensorArg Shape(const DLTensor* t, const char* name = "in") {
  return {ViewOf(t, name), device::Role::kShape, name};
}

inline std::string NameOf(const char* name) { return name ? std::string(name) : std::string(); }

inline ReduceOp ToReduceOp(const starling_reduce_op_t& op) {
  const int value = EnumValue(op);
  STARLING_CHECK_ARG(value >= STARLING_SUM && value <= STARLING_MAX, "reduce op ", value,
                     " is not STARLING_SUM, STARLING_AVERAGE, STARLING_MIN or STARLING_MAX");
  return static_cast<ReduceOp>(value);
}

}  // namespace starling::capi
