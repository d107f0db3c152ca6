#include "impl/windows/registry.h"

#include <cstring>

#include "impl/common/logging.h"
#include "impl/ops/exchange.h"
#include "impl/ops/reduce.h"

namespace starling::windows {
namespace {
using transport::Channel;
}

std::shared_ptr<Window> Registry::Find(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<Window> Registry::Find(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> Registry::Names() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (const auto& entry : by_name_) names.push_back(entry.first);
  return names;
}

void Registry::Add(std::shared_ptr<Window> window) {
  std::lock_guard<std::mutex> lock(mutex_);
  by_id_[window->id()] = window;
  by_name_[window->name()] = std::move(window);
}

void Registry::Remove(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  by_name_.erase(it->second->name());
  by_id_.erase(it);
}

bool Registry::empty() {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_id_.empty();
}

bool Service::Poll(runtime::Context& context) {
  bool worked = ServePending(context);
  transport::Transport& transport = context.transport();
  for (;;) {
    if (!posted_) {
      ticket_ = transport.Irecv(Channel::kWindowRequest, transport::kAnySource, &incoming_, sizeof incoming_);
      posted_ = true;
    }
    transport::Completion completion;
    if (!transport.Test(ticket_, &completion)) break;
    posted_ = false;
    worked = true;
    const WindowRequest request = incoming_;
    if (completion.bytes != sizeof request || request.magic != kWindowMagic) {
      STARLING_LOG(LogLevel::kError, "dropped a malformed window request from rank ", completion.source);
      continue;
    }
    Handle(context, request, completion.source);
  }
  return worked;
}

void Service::Stop(runtime::Context& context) {
  if (posted_) context.transport().CancelRecv(ticket_);
  posted_ = false;
  pending_.clear();
}

void Service::Reply(runtime::Context& context, int to, Code code, const std::string& message, const void* data,
                    size_t bytes) {
  ops::Exchange ex(context, Channel::kWindowReply, [] { return std::string("window reply"); });
  WindowReply reply;
  reply.code = static_cast<int32_t>(code);
  reply.bytes = data ? bytes : 0;
  reply.chunk = static_cast<uint32_t>(ops::WholeMessageChunk(bytes));
  std::strncpy(reply.message, message.c_str(), sizeof reply.message - 1);
  ex.SendRaw(to, &reply, sizeof reply);
  if (data && bytes > 0) ex.SendRaw(to, data, bytes, reply.chunk);
  ex.Wait();
}

void Service::Handle(runtime::Context& context, const WindowRequest& request, int sender) {
  Registry& registry = context.Extension<Registry>();
  std::shared_ptr<Window> window = registry.Find(request.window_id);
  const bool writes = request.op == WindowOp::kPut || request.op == WindowOp::kAccumulate;
  const int slot = window ? window->SlotOf(sender) : -1;

  // Refusals: the payload that follows a put/accumulate is still drained.
  std::string refusal;
  Code code = Code::kOk;
  if (!window) {
    code = Code::kNotFound;
    refusal = Str("rank ", context.rank(), " has no window #", request.window_id, " (freed, or never created)");
  } else if (writes && slot < 0) {
    code = Code::kInvalidArgument;
    refusal = Str("rank ", context.rank(), " keeps no buffer for rank ", sender, " in window '", window->name(),
                  "': rank ", sender, " is not its in-neighbor");
  } else if (writes && request.bytes != window->tensor().bytes) {
    code = Code::kMismatch;
    refusal = Str("window '", window->name(), "' on rank ", context.rank(), " holds ", window->tensor().bytes,
                  " bytes but rank ", sender, " sent ", request.bytes);
  } else if (!writes && request.op != WindowOp::kGet && request.op != WindowOp::kMutexAcquire &&
             request.op != WindowOp::kMutexRelease) {
    code = Code::kInvalidArgument;
    refusal = Str("unknown window operation ", static_cast<uint32_t>(request.op));
  }

  ops::Exchange data(context, Channel::kWindowData, [] { return std::string("window data"); });
  Pending pending{request, sender, window, nullptr};
  if (writes && request.bytes > 0) {
    if (code == Code::kOk && request.op == WindowOp::kPut) {
      data.RecvRaw(sender, window->Shadow(slot), request.bytes, nullptr, request.chunk);
    } else {
      pending.data = std::make_shared<runtime::ScratchPool::Buffer>(scratch_.Get(request.bytes));
      data.RecvRaw(sender, pending.data->data(), request.bytes, nullptr, request.chunk);
    }
    data.Wait();
  }
  if (code != Code::kOk) {
    Reply(context, sender, code, refusal);
    return;
  }
  switch (request.op) {
    case WindowOp::kGet: {
      runtime::ScratchPool::Buffer copy = scratch_.Get(window->tensor().bytes);
      window->Snapshot(copy.data());
      Reply(context, sender, Code::kOk, "", copy.data(), window->tensor().bytes);
      return;
    }
    case WindowOp::kMutexRelease:
      if (window->UnlockSlot(sender, sender)) {
        Reply(context, sender, Code::kOk, "");
        ServePending(context);
      } else {
        Reply(context, sender, Code::kInvalidUsage,
              Str("rank ", sender, " released the mutex of window '", window->name(), "' on rank ", context.rank(),
                  " without holding it"));
      }
      return;
    default:
      if (!TryFinish(context, pending)) pending_.push_back(std::move(pending));
  }
}

bool Service::TryFinish(runtime::Context& context, Pending& p) {
  const WindowRequest& r = p.request;
  // A sender that already holds its slot (win_mutex, then a put under the mutex)
  // writes without taking it again.
  const bool held = r.op != WindowOp::kMutexAcquire && p.window->SlotHolder(p.sender) == p.sender;
  const bool locks = !held && (r.op == WindowOp::kMutexAcquire || (r.flags & kRequestRequireMutex));
  if (locks && !p.window->TryLockSlot(p.sender, p.sender)) return false;
  const bool has_p = (r.flags & kRequestHasP) != 0;
  const int slot = p.window->SlotOf(p.sender);
  if (r.op == WindowOp::kPut) {
    p.window->CommitShadow(slot, r.weight, /*count_version=*/true, has_p, r.p);
  } else if (r.op == WindowOp::kAccumulate) {
    p.window->Accumulate(slot, p.data ? p.data->data() : nullptr, r.weight, has_p, r.p);
  }
  // A write under the mutex holds it only while applying; an acquire keeps it.
  if (locks && r.op != WindowOp::kMutexAcquire) p.window->UnlockSlot(p.sender, p.sender);
  Reply(context, p.sender, Code::kOk, "");
  return true;
}

bool Service::ServePending(runtime::Context& context) {
  bool worked = false;
  for (size_t i = 0; i < pending_.size();) {
    if (TryFinish(context, pending_[i])) {
      pending_.erase(pending_.begin() + static_cast<long>(i));
      worked = true;
    } else {
      ++i;
    }
  }
  return worked;
}

}  // namespace starling::windows
