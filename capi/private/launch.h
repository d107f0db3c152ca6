// The common shape of every operation entry point: build the op on the caller's
// thread (validating everything), then run it to completion (blocking form) or queue
// it and hand back a request (nonblocking form).
#pragma once

#include <string>

#include "capi/private/api.h"
#include "capi/private/objects.h"
#include "impl/common/dtype.h"

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

inline std::string NameOf(const char* name) { return name ? std::string(name) : std::string(); }

// `op` is the argument as passed (see RawEnumValue): it may be any int.
inline ReduceOp ToReduceOp(const starling_reduce_op_t& arg) {
  const int op = RawEnumValue(arg);
  STARLING_CHECK_ARG(op >= STARLING_SUM && op <= STARLING_MAX, "reduce op ", op,
                     " is not STARLING_SUM, STARLING_AVERAGE, STARLING_MIN or STARLING_MAX");
  return static_cast<ReduceOp>(op);
}

}  // namespace starling::capi
