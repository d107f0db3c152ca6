// The window service: answers other ranks' window requests (applies puts and
// accumulates, serves gets, grants and releases mutex slots) while this rank's own
// threads do anything else.
//
// It runs from every wait loop and from the progress thread (one caller at a time,
// see Context::ServiceBackground), so it must never block: a service call nested in
// a wait, while the peer's service is nested in a wait on us, would otherwise
// deadlock (two ranks getting from each other did, before this design). Each request
// is therefore a small state machine (receive payload -> wait for a mutex slot ->
// send reply) advanced by Poll() with nonblocking transport calls only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "impl/common/error.h"
#include "impl/runtime/context.h"
#include "impl/runtime/scratch.h"
#include "impl/transport/transport.h"
#include "impl/windows/protocol.h"
#include "impl/windows/window.h"

namespace starling::windows {

class Registry;

class Service {
 public:
  Service();
  ~Service();
  // Takes new requests and advances those in flight. True if anything progressed.
  // Throws Error(kTransport) only when the transport itself failed.
  bool Poll(runtime::Context& context, Registry& registry);
  // Withdraws the posted request receive and lets replies in flight finish (waiting
  // at most `grace_seconds`; their buffers are quarantined, never freed under MPI, if not).
  void Stop(runtime::Context& context, double grace_seconds);

 private:
  struct Task;
  // Takes a request that arrived: checks it, posts its payload's receive.
  void Start(runtime::Context& context, Registry& registry, const WindowRequest& request, size_t bytes,
             int source);
  // One step of `task`; true if it progressed. Sets task.finished at the end.
  bool Advance(runtime::Context& context, Task& task);
  // Applies the request once its mutex slot is free; false while it must wait.
  bool TryApply(runtime::Context& context, Task& task);
  void SendReply(runtime::Context& context, Task& task, Code code, const std::string& message);
  // True if another put of the same sender to the same window still uses its shadow.
  bool ShadowBusy(const Task& task) const;

  runtime::ScratchPool scratch_;  // the service runs beside operations: its own memory
  transport::Ticket ticket_;
  // A request, with room to spare so a somewhat longer (malformed) message is still
  // received and answered instead of failing the receive.
  struct Incoming {
    WindowRequest request;
    char spare[64];
  } incoming_;
  bool posted_ = false;
  std::vector<std::unique_ptr<Task>> tasks_;  // in arrival order
};

}  // namespace starling::windows
