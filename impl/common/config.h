// The STARLING_* environment variables: one table (name, BlueFog alias, default,
// meaning), parsed once per process. Invalid values are reported by name when a
// context is created; nothing is printed.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace starling {

enum class LogLevel : int { kOff = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4, kTrace = 5 };

struct Config {
  LogLevel log_level = LogLevel::kOff;
  double stall_warning_seconds = 60.0;  // 0: never warn
  double timeout_seconds = 0.0;         // 0: wait forever
  size_t fusion_threshold = 8u << 20;   // bytes; 0 disables fusion
  int nodes_per_machine = 0;            // 0: detect machines by shared memory
  std::string timeline_prefix;          // empty: no timeline
  size_t chunk_bytes = 1u << 20;        // pipelining unit of large messages
  size_t inline_bytes = 16u << 10;      // payloads up to this travel with their header
  double spin_microseconds = 50.0;      // busy-wait before sleeping
  double window_poll_microseconds = 200.0;  // longest sleep between window polls
  double peer_check_seconds = 0.5;      // probe same-host peers after waiting this long; 0: never
  double mismatch_check_seconds = 1.0;  // announce a stalled operation to its awaited ranks; 0: never
  double ft_detector_seconds = 0.0;     // ULFM's heartbeat detector timeout; 0: detector off
  double heartbeat_seconds = 0.5;       // ULFM: a waited-for rank silent this long is failed; 0: off
  std::string gpu_path = "auto";        // auto, staged or nccl
  size_t gpu_chunk_bytes = 4u << 20;    // staged copies of large CUDA tensors go in chunks of this size
  size_t gpu_scratch_bytes = 64u << 20; // NCCL-path device scratch per operation (and pooled) at most
  bool shm = true;                      // probe shared memory between same-host ranks at creation
  size_t shm_min_bytes = 0;             // neighbor data below this travels in MPI messages
  size_t shm_buffer_bytes = 256u << 20; // largest neighbor payload through shared memory; 0: none
  std::string shm_copy = "auto";        // auto, plain or stream: how neighbor data is copied into the outbox
  size_t shm_pull_bytes = 128u << 10;   // neighbor data up to this size is read from the sender's memory; 0: never
};

struct ConfigVar {
  const char* name;
  const char* alias;  // BlueFog's name for the same setting, or nullptr
  const char* default_value;
  const char* doc;
};

const std::vector<ConfigVar>& ConfigTable();

using EnvLookup = std::function<const char*(const char*)>;

// Parses every variable through `lookup` (getenv in production, a map in tests).
// A STARLING_ name wins over its BLUEFOG_ alias. Throws Error(kInvalidArgument) that
// names the variable and the accepted values.
Config ParseConfig(const EnvLookup& lookup);

// The process-wide configuration, parsed from the environment on first use. Throws
// the parse error (every time) if the environment holds an invalid value.
const Config& GlobalConfig();

// The table with the values in effect: "NAME=value (default ...) meaning" per line.
std::string DescribeConfig(const EnvLookup& lookup);

}  // namespace starling
