// The timeline: with STARLING_TIMELINE=<prefix>, each rank writes <prefix><rank>.json in
// Chrome trace format (chrome://tracing, Perfetto): an instant when an operation is
// submitted, a span while it runs, and the user's own activities. One lane ("thread")
// per operation name. The file is a complete JSON array once the context is destroyed.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace starling::runtime {

class Timeline {
 public:
  // Opens <prefix><rank>.json (the process's first timeline) or
  // <prefix><rank>.<n>.json (its n-th, so contexts never share a file), creating
  // missing directories of the prefix; throws Error(kInvalidArgument) naming the
  // directory or file that cannot be created.
  Timeline(const std::string& prefix, int rank);
  ~Timeline();  // closes the array and the file

  void Instant(const std::string& lane, const std::string& name);
  void Begin(const std::string& lane, const std::string& name, const std::string& detail = "");
  void End(const std::string& lane);

 private:
  int LaneId(const std::string& lane);  // mutex held
  void Write(const std::string& event);  // mutex held
  double Now() const;

  std::string path_;
  int rank_;
  std::FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::map<std::string, int> lanes_;
  bool first_ = true;
};

}  // namespace starling::runtime
