#include "impl/common/quarantine.h"

#include <mutex>
#include <vector>

namespace starling {

void Quarantine(std::shared_ptr<void> object) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::shared_ptr<void>>();  // never destroyed: MPI may outlive statics
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(object));
}

}  // namespace starling
