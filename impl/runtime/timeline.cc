#include "impl/runtime/timeline.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "impl/common/error.h"

namespace starling::runtime {
namespace {

// JSON string contents: quotes, backslashes and control characters escaped.
std::string Escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

Timeline::Timeline(const std::string& prefix, int rank) : rank_(rank), start_(std::chrono::steady_clock::now()) {
  static std::atomic<int> opened{0};
  const int n = opened.fetch_add(1);
  path_ = prefix + std::to_string(rank) + (n == 0 ? "" : "." + std::to_string(n)) + ".json";
  // A prefix like runs/today/rank_ should just work: missing directories are created,
  // parents included. Every rank does this at once, so losing the race to another rank
  // (the directory exists afterwards) is not an error.
  const std::filesystem::path directory = std::filesystem::path(path_).parent_path();
  if (!directory.empty()) {
    std::error_code error, ignored;
    std::filesystem::create_directories(directory, error);
    STARLING_CHECK_ARG(!error || std::filesystem::is_directory(directory, ignored),
                       "cannot create the directory '", directory.string(), "' for the timeline file '", path_,
                       "' (STARLING_TIMELINE): ", error.message());
  }
  file_ = std::fopen(path_.c_str(), "w");
  STARLING_CHECK_ARG(file_ != nullptr, "cannot create the timeline file '", path_, "' (STARLING_TIMELINE): ",
                     std::strerror(errno));
  std::fputs("[\n", file_);
  Write(Str("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": ", rank_, ", \"args\": {\"name\": \"rank ", rank_,
            "\"}}"));
}

Timeline::~Timeline() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
}

double Timeline::Now() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
}

int Timeline::LaneId(const std::string& lane) {
  auto it = lanes_.find(lane);
  if (it != lanes_.end()) return it->second;
  const int id = static_cast<int>(lanes_.size()) + 1;
  lanes_.emplace(lane, id);
  Write(Str("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": ", rank_, ", \"tid\": ", id,
            ", \"args\": {\"name\": \"", Escape(lane), "\"}}"));
  return id;
}

void Timeline::Write(const std::string& event) {
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fputs(event.c_str(), file_);
}

void Timeline::Instant(const std::string& lane, const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int tid = LaneId(lane);
  Write(Str("{\"name\": \"", Escape(name), "\", \"ph\": \"i\", \"s\": \"t\", \"ts\": ", Now(), ", \"pid\": ", rank_,
            ", \"tid\": ", tid, "}"));
}

void Timeline::Begin(const std::string& lane, const std::string& name, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int tid = LaneId(lane);
  Write(Str("{\"name\": \"", Escape(name), "\", \"ph\": \"B\", \"ts\": ", Now(), ", \"pid\": ", rank_, ", \"tid\": ",
            tid, detail.empty() ? "" : Str(", \"args\": {\"op\": \"", Escape(detail), "\"}"), "}"));
}

void Timeline::End(const std::string& lane) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int tid = LaneId(lane);
  Write(Str("{\"ph\": \"E\", \"ts\": ", Now(), ", \"pid\": ", rank_, ", \"tid\": ", tid, "}"));
}

}  // namespace starling::runtime
