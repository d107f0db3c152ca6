#include "impl/windows/service.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "impl/common/logging.h"
#include "impl/common/quarantine.h"
#include "impl/ops/exchange.h"
#include "impl/windows/registry.h"

namespace starling::windows {
namespace {
using transport::Channel;
using transport::Ticket;

// Posts the messages of a `bytes`-byte stream cut in `chunk`-byte pieces (the
// sender's cut: both sides compute ops::WholeMessageChunk).
void PostStream(transport::Transport& transport, bool send, Channel channel, int peer, char* data, size_t bytes,
                size_t chunk, std::vector<Ticket>& tickets) {
  for (size_t offset = 0; offset < bytes; offset += chunk) {
    const size_t length = std::min(chunk, bytes - offset);
    tickets.push_back(send ? transport.Isend(channel, peer, data + offset, length)
                           : transport.Irecv(channel, peer, data + offset, length));
  }
}

// True once every send completed.
bool SendsDone(transport::Transport& transport, std::vector<Ticket>& tickets) {
  bool done = true;
  for (Ticket& t : tickets) done &= transport.Test(t, nullptr);
  return done;
}

// True once every receive of a PostStream completed; a short message is an error
// rather than stale bytes.
bool ReceivesDone(transport::Transport& transport, std::vector<Ticket>& tickets, size_t bytes, size_t chunk) {
  bool done = true;
  for (size_t i = 0; i < tickets.size(); ++i) {
    if (!tickets[i].active) continue;
    transport::Completion completion;
    if (!transport.Test(tickets[i], &completion)) {
      done = false;
      continue;
    }
    const size_t length = std::min(chunk, bytes - i * chunk);
    STARLING_CHECK(completion.bytes == length, Code::kMismatch, "rank ", completion.source, " sent ",
                   completion.bytes, " bytes of window data where ", length, " were expected");
  }
  return done;
}
}  // namespace

struct Service::Task {
  enum class State { kReceiving, kWaitingSlot, kReplying };
  WindowRequest request;
  int sender = -1;
  std::shared_ptr<Window> window;
  Code code = Code::kOk;  // a refusal decided on arrival, sent once the payload is drained
  std::string refusal;
  char* payload = nullptr;               // where the payload lands: a shadow buffer or `scratch`
  runtime::ScratchPool::Buffer scratch;  // accumulate, refused or re-routed payload
  std::vector<Ticket> receives;
  WindowReply reply;
  runtime::ScratchPool::Buffer reply_data;  // a get's snapshot
  std::vector<Ticket> sends;
  State state = State::kReceiving;
  bool finished = false;
};

Service::Service() = default;
Service::~Service() = default;

bool Service::Poll(runtime::Context& context, Registry& registry) {
  transport::Transport& transport = context.transport();
  bool worked = false;
  // Advance what is in flight first: replies free buffers, released slots let
  // waiting requests through.
  for (bool again = true; again;) {
    again = false;
    for (auto& task : tasks_)
      if (!task->finished) again |= Advance(context, *task);
    worked |= again;
  }
  for (;;) {
    if (!posted_) {
      ticket_ = transport.Irecv(Channel::kWindowRequest, transport::kAnySource, &incoming_, sizeof incoming_);
      posted_ = true;
    }
    transport::Completion completion;
    try {
      if (!transport.Test(ticket_, &completion)) break;
    } catch (const Error& e) {
      // Longer than any request: the sender is out of step; it gets no reply.
      posted_ = ticket_.active;  // still posted after ULFM's "failure pending" (any source)
      // A failed transport or a dead peer (ULFM) ends the service's work: rethrown, so
      // the wait or the progress thread fails the context instead of polling forever.
      if (e.code() == Code::kTransport || e.code() == Code::kPeerFailed) throw;
      STARLING_LOG(LogLevel::kError, "dropped a window request: ", e.what());
      continue;
    }
    posted_ = false;
    worked = true;
    Start(context, registry, incoming_.request, completion.bytes, completion.source);
  }
  for (size_t i = 0; i < tasks_.size();) {
    if (tasks_[i]->finished) {
      tasks_.erase(tasks_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  return worked;
}

void Service::Start(runtime::Context& context, Registry& registry, const WindowRequest& request, size_t bytes,
                    int source) {
  tasks_.push_back(std::make_unique<Task>());
  Task& task = *tasks_.back();
  task.request = request;
  task.sender = source;
  const std::string malformed = MalformedRequest(request, bytes, source);
  if (!malformed.empty()) {
    // Nothing in it can be trusted, not even its payload size: answer and drain nothing.
    STARLING_LOG(LogLevel::kError, "rank ", source, " sent ", malformed);
    task.request.bytes = 0;
    task.code = Code::kMismatch;
    task.refusal = Str("rank ", context.rank(), " received ", malformed, " from rank ", source,
                       " (corrupted message, or ranks out of step)");
  } else {
    task.window = registry.Find(request.window_id);
    const bool writes = request.op == WindowOp::kPut || request.op == WindowOp::kAccumulate;
    const int slot = task.window ? task.window->SlotOf(source) : -1;
    if (!task.window) {
      // Creation registers a window before any rank can return from it, so an id not
      // issued yet means the sender is ahead of this rank's sequence of creations.
      task.code = Code::kNotFound;
      task.refusal = request.window_id < registry.IssuedIds()
                         ? Str("rank ", context.rank(), " has no window #", request.window_id, " (it was freed)")
                         : Str("rank ", context.rank(), " has not created window #", request.window_id,
                               " (ranks created windows in different orders)");
    } else if (writes && slot < 0) {
      task.code = Code::kInvalidArgument;
      task.refusal = Str("rank ", context.rank(), " keeps no buffer for rank ", source, " in window '",
                         task.window->name(), "': rank ", source, " is not its in-neighbor");
    } else if (writes && request.bytes != task.window->tensor().bytes) {
      task.code = Code::kMismatch;
      task.refusal = Str("window '", task.window->name(), "' on rank ", context.rank(), " holds ",
                         task.window->tensor().bytes, " bytes but rank ", source, " sent ", request.bytes);
    }
    if (writes && request.bytes > 0) {
      // A put lands straight in the sender's shadow buffer unless that buffer may be
      // in use (refused, or another put of this sender's still holds it).
      if (task.code == Code::kOk && request.op == WindowOp::kPut && !ShadowBusy(task)) {
        task.payload = task.window->Shadow(slot);
      } else {
        try {
          task.scratch = scratch_.Get(request.bytes);
          task.payload = task.scratch.data();
        } catch (const std::bad_alloc&) {
          // No room to drain it: refuse at once (the sender's operation fails).
          task.request.bytes = 0;
          task.code = Code::kOutOfMemory;
          task.refusal = Str("rank ", context.rank(), " could not allocate ", request.bytes, " bytes for window data");
        }
      }
      PostStream(context.transport(), false, Channel::kWindowData, source, task.payload, task.request.bytes,
                 request.chunk, task.receives);
    }
  }
  Advance(context, task);
}

bool Service::ShadowBusy(const Task& task) const {
  for (const auto& other : tasks_) {
    if (other.get() != &task && !other->finished && other->sender == task.sender && other->window == task.window &&
        other->request.op == WindowOp::kPut && other->state != Task::State::kReplying)
      return true;
  }
  return false;
}

bool Service::Advance(runtime::Context& context, Task& task) {
  transport::Transport& transport = context.transport();
  switch (task.state) {
    case Task::State::kReceiving:
      try {
        if (!ReceivesDone(transport, task.receives, task.request.bytes, task.request.chunk)) return false;
      } catch (const Error& e) {
        if (e.code() == Code::kTransport || e.code() == Code::kPeerFailed) throw;
        for (Ticket& t : task.receives)
          if (t.active) transport.CancelRecv(t);
        task.code = e.code();
        task.refusal = e.what();
      }
      task.receives.clear();
      if (task.code != Code::kOk) {
        SendReply(context, task, task.code, task.refusal);
        return true;
      }
      task.state = Task::State::kWaitingSlot;
      [[fallthrough]];
    case Task::State::kWaitingSlot:
      return TryApply(context, task);
    case Task::State::kReplying:
      if (!SendsDone(transport, task.sends)) return false;
      task.finished = true;
      return true;
  }
  return false;
}

bool Service::TryApply(runtime::Context& context, Task& task) {
  const WindowRequest& r = task.request;
  Window& window = *task.window;
  switch (r.op) {
    case WindowOp::kGet: {
      try {
        task.reply_data = scratch_.Get(window.tensor().bytes);
      } catch (const std::bad_alloc&) {
        SendReply(context, task, Code::kOutOfMemory,
                  Str("rank ", context.rank(), " could not allocate ", window.tensor().bytes, " bytes for a get"));
        return true;
      }
      window.Snapshot(task.reply_data.data());
      SendReply(context, task, Code::kOk, "");
      return true;
    }
    case WindowOp::kMutexRelease:
      if (window.UnlockSlot(task.sender, task.sender)) {
        SendReply(context, task, Code::kOk, "");
      } else {
        SendReply(context, task, Code::kInvalidUsage,
                  Str("rank ", task.sender, " released the mutex of window '", window.name(), "' on rank ",
                      context.rank(), " without holding it"));
      }
      return true;
    default:
      break;
  }
  // A sender that already holds its slot (win_mutex, then a put under the mutex)
  // writes without taking it again.
  const bool held = r.op != WindowOp::kMutexAcquire && window.SlotHolder(task.sender) == task.sender;
  const bool locks = !held && (r.op == WindowOp::kMutexAcquire || (r.flags & kRequestRequireMutex));
  if (locks && !window.TryLockSlot(task.sender, task.sender)) return false;  // asked again on the next poll
  const bool has_p = (r.flags & kRequestHasP) != 0;
  const int slot = window.SlotOf(task.sender);
  if (r.op == WindowOp::kPut) {
    if (task.payload != nullptr && task.payload != window.Shadow(slot))
      std::memcpy(window.Shadow(slot), task.payload, r.bytes);
    window.CommitShadow(slot, r.weight, /*count_version=*/true, has_p, r.p);
  } else if (r.op == WindowOp::kAccumulate) {
    window.Accumulate(slot, task.payload, r.weight, has_p, r.p);
  }
  // A write under the mutex holds it only while applying; an acquire keeps it.
  if (locks && r.op != WindowOp::kMutexAcquire) window.UnlockSlot(task.sender, task.sender);
  SendReply(context, task, Code::kOk, "");
  return true;
}

void Service::SendReply(runtime::Context& context, Task& task, Code code, const std::string& message) {
  task.scratch = runtime::ScratchPool::Buffer();  // the payload was applied or dropped
  WindowReply& reply = task.reply;
  reply.code = static_cast<int32_t>(code);
  const size_t bytes = code == Code::kOk && task.reply_data.data() ? task.window->tensor().bytes : 0;
  reply.bytes = bytes;
  reply.chunk = static_cast<uint32_t>(ops::WholeMessageChunk(bytes));
  std::strncpy(reply.message, message.c_str(), sizeof reply.message - 1);
  transport::Transport& transport = context.transport();
  task.sends.push_back(transport.Isend(Channel::kWindowReply, task.sender, &reply, sizeof reply));
  PostStream(transport, true, Channel::kWindowReply, task.sender, task.reply_data.data(), bytes, reply.chunk,
             task.sends);
  task.state = Task::State::kReplying;
}

void Service::Stop(runtime::Context& context, double grace_seconds) {
  transport::Transport& transport = context.transport();
  if (posted_) transport.CancelRecv(ticket_);
  posted_ = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  for (auto& task : tasks_) {
    for (Ticket& t : task->receives)
      if (t.active) transport.CancelRecv(t);
    task->receives.clear();
    bool done = false;
    try {
      while (!(done = SendsDone(transport, task->sends)) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    } catch (const Error&) {
      // The transport failed: nothing more can complete.
    }
    // MPI may still read this task's reply: quarantine it rather than free it under MPI.
    if (!done) Quarantine(std::shared_ptr<Task>(std::move(task)));
  }
  tasks_.clear();
}

}  // namespace starling::windows
