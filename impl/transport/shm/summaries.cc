#include "impl/transport/shm/summaries.h"

#include <map>
#include <mutex>

namespace starling::transport::shm {
namespace {

struct Registry {
  std::mutex mutex;
  int next = 1;
  std::map<int, std::string> lines;  // by id: creation order
};

Registry& Instance() {
  static auto* registry = new Registry();  // never destroyed: contexts may outlive statics
  return *registry;
}

}  // namespace

int AddSummary(const std::string& line) {
  Registry& r = Instance();
  std::lock_guard<std::mutex> lock(r.mutex);
  const int id = r.next++;
  r.lines[id] = line;
  return id;
}

void UpdateSummary(int id, const std::string& line) {
  Registry& r = Instance();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.lines.find(id);
  if (it != r.lines.end()) it->second = line;
}

void DropSummary(int id) {
  Registry& r = Instance();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.lines.erase(id);
}

std::string SummaryLines() {
  Registry& r = Instance();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string out;
  for (const auto& [id, line] : r.lines) out += "shm: " + line + "\n";
  return out;
}

}  // namespace starling::transport::shm
