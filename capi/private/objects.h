// The handle tables of contexts and requests, shared by the capi/ glue files.
#pragma once

#include <memory>

#include "capi/private/handles.h"
#include "impl/runtime/context.h"
#include "impl/runtime/op.h"
#include "starling/starling.h"

namespace starling::capi {

struct RequestEntry {
  std::shared_ptr<runtime::Context> context;  // keeps the engine reachable for waits
  std::shared_ptr<runtime::Request> request;
};

HandleTable<runtime::Context, starling_context_t>& Contexts();
HandleTable<RequestEntry, starling_request_t>& Requests();

// Runs `op` to completion (blocking form); throws its error.
void RunBlocking(runtime::Context& context, std::unique_ptr<runtime::Op> op);
// Queues `op` and stores its request handle in *out (nonblocking form).
void RunNonblocking(const std::shared_ptr<runtime::Context>& context, std::unique_ptr<runtime::Op> op,
                    starling_request_t* out);

}  // namespace starling::capi
