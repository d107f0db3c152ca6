#include "impl/windows/registry.h"

namespace starling::windows {

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

bool Registry::Add(std::shared_ptr<Window> window) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool first = by_id_.empty();
  by_id_[window->id()] = window;
  by_name_[window->name()] = std::move(window);
  return first;
}

bool Registry::Remove(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  by_name_.erase(it->second->name());
  by_id_.erase(it);
  return by_id_.empty();
}

void Registry::UnlinkSegments() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, window] : by_id_) window->UnlinkSegment();
}

}  // namespace starling::windows
