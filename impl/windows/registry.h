// The windows of one context, by name and by id, and the service that answers other
// ranks' requests on them.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "impl/windows/service.h"
#include "impl/windows/window.h"

namespace starling::windows {

class Registry {
 public:
  std::shared_ptr<Window> Find(uint32_t id);
  std::shared_ptr<Window> Find(const std::string& name);
  std::vector<std::string> Names();
  // Returns true if it was the first window (the service must start).
  bool Add(std::shared_ptr<Window> window);
  // Returns true if it was the last window (the service may stop).
  bool Remove(uint32_t id);
  // The context is going (destroy, also a local one after an abort or a failure): every
  // window's own segment loses its name. A peer that never mapped one (it failed, or
  // the ranks created windows in different orders) would otherwise leave it in /dev/shm
  // for good, since windows that may still be written to are kept until the process exits.
  void UnlinkSegments();
  // Ids are issued in creation order, the same on every rank; a creation that fails
  // still uses its id, so the sequences never drift apart.
  uint32_t NextId() { return next_id_.fetch_add(1); }
  uint32_t IssuedIds() const { return next_id_.load(); }  // ids below this were issued
  // After a grow or shrink (no window exists): the ranks start counting again, as a
  // process that joined does, so that every member gives the next window the same id.
  void RestartIds() { next_id_.store(1); }

  std::atomic<bool> associated_p{false};
  Service service;  // called through Context::ServiceBackground only

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Window>> by_name_;
  std::map<uint32_t, std::shared_ptr<Window>> by_id_;
  std::atomic<uint32_t> next_id_{1};
};

}  // namespace starling::windows
