// ThreadSanitizer's view of the order that travels between processes (see
// mpi_transport.cc: everything before a send happens before whatever follows a
// completed request in this process). A shared-memory path that stands in for
// messages states the same order, or TSan reports a write before it and a read by the
// progress thread after a later message (a window get served after a board barrier).
// No-ops outside TSan builds.
#pragma once

namespace starling::transport {

// As before a send: this thread's writes so far are published.
void OrderBeforePublish();
// As after a completed receive: what any thread published before is visible.
void OrderAfterObserve();

}  // namespace starling::transport
