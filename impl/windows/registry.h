// The windows of one context and the service that answers other ranks' requests.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "impl/runtime/context.h"
#include "impl/transport/transport.h"
#include "impl/windows/protocol.h"
#include "impl/windows/window.h"

namespace starling::windows {

// Answers window requests from other ranks: applies puts and accumulates, serves gets,
// grants and releases mutex slots. Runs on the executor only (see
// Context::SetBackgroundService), one request at a time.
class Service {
 public:
  bool Poll(runtime::Context& context);
  // Withdraws the posted receive (the last window is gone, or the context ends).
  void Stop(runtime::Context& context);

 private:
  struct Pending {
    WindowRequest request;
    int sender;
    std::shared_ptr<Window> window;
    std::shared_ptr<runtime::ScratchPool::Buffer> data;  // accumulate payload
  };
  void Handle(runtime::Context& context, const WindowRequest& request, int sender);
  // Applies a put/accumulate or grants a mutex once the sender's slot is free.
  bool TryFinish(runtime::Context& context, Pending& pending);
  bool ServePending(runtime::Context& context);
  void Reply(runtime::Context& context, int to, Code code, const std::string& message, const void* data = nullptr,
             size_t bytes = 0);

  transport::Ticket ticket_;
  WindowRequest incoming_;
  bool posted_ = false;
  std::vector<Pending> pending_;  // waiting for a mutex slot
};

class Registry {
 public:
  std::shared_ptr<Window> Find(uint32_t id);
  std::shared_ptr<Window> Find(const std::string& name);
  std::vector<std::string> Names();
  void Add(std::shared_ptr<Window> window);
  void Remove(uint32_t id);
  bool empty();
  uint32_t NextId() { return next_id_++; }  // executor only; equal on every rank

  std::atomic<bool> associated_p{false};
  Service service;  // executor only

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Window>> by_name_;
  std::map<uint32_t, std::shared_ptr<Window>> by_id_;
  uint32_t next_id_ = 1;
};

}  // namespace starling::windows
