#include "impl/common/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "impl/common/error.h"
#include "impl/common/logging.h"

namespace starling {
namespace {

const std::vector<ConfigVar> kTable = {
    {"STARLING_LOG_LEVEL", "BLUEFOG_LOG_LEVEL", "off",
     "off, error, warn, info, debug or trace; messages go to stderr with a [rank N] prefix"},
    {"STARLING_STALL_WARNING_SECONDS", nullptr, "60",
     "warn (at level warn) when an operation has waited this long for peers, naming them; 0 disables"},
    {"STARLING_TIMEOUT_SECONDS", nullptr, "0",
     "fail an operation with STARLING_ERR_TIMEOUT after waiting this long for peers; 0 waits forever"},
    {"STARLING_FUSION_THRESHOLD", "BLUEFOG_FUSION_THRESHOLD", "8388608",
     "bytes: queued neighbor_allreduce calls with the same neighbors travel as one message up to this size; 0 disables fusion"},
    {"STARLING_NODES_PER_MACHINE", "BLUEFOG_NODES_PER_MACHINE", "0",
     "ranks per machine; 0 detects machines by shared memory, >0 groups consecutive ranks (simulates machines)"},
    {"STARLING_TIMELINE", "BLUEFOG_TIMELINE", "",
     "file prefix: each rank writes a Chrome-trace timeline of its operations to <prefix><rank>.json; empty disables"},
    {"STARLING_CHUNK_BYTES", nullptr, "1048576",
     "bytes: large messages are split into chunks of this size so transfers overlap reductions (between "
     "machines 4x this, at most 64 MiB unless this is larger: each message's rendezvous idles the link)"},
    {"STARLING_INLINE_BYTES", nullptr, "16384",
     "bytes: payloads up to this size travel in the same message as their header"},
    {"STARLING_SPIN_MICROSECONDS", nullptr, "50",
     "a waiting thread busy-polls this long before sleeping (latency versus CPU use)"},
    {"STARLING_WINDOW_POLL_MICROSECONDS", nullptr, "200",
     "while windows exist, the idle progress thread sleeps at most this long between polls for incoming puts"},
    {"STARLING_PEER_CHECK_SECONDS", nullptr, "0.5",
     "once an operation has waited this long for peers (and again every as long), check whether ranks on this host are still alive (by pid): a dead one fails the operation with STARLING_ERR_PEER_FAILED naming it; 0 disables"},
    {"STARLING_MISMATCH_CHECK_SECONDS", nullptr, "1",
     "once a numbered operation has waited this long for peers, tell the awaited ranks which operation this is; a rank inside another operation of the same number fails it with STARLING_ERR_MISMATCH, and so does every rank (the context is then unusable: destroy it). Catches ranks that disagree where no message of the other operation arrives (a neighbor call meeting a classic collective under a non-default topology); 0 disables"},
    {"STARLING_FT_DETECTOR_SECONDS", nullptr, "0",
     "under ULFM (Open MPI 5, --with-ft ulfm), when Starling initializes MPI: turn on ULFM's heartbeat failure detector, which declares a rank failed after this many seconds without a heartbeat (also a death the launcher never reports); 0: off (deaths are known from the launcher's notice only)"},
    {"STARLING_HEARTBEAT_SECONDS", nullptr, "0.5",
     "under ULFM (Open MPI 5, --with-ft ulfm): a wait that lasts pings the ranks it waits for every this/5 seconds (their progress thread answers, also while the application computes); a rank that answers nothing for this long fails the wait with STARLING_ERR_PEER_FAILED naming it, on every survivor (a death on another host, or one the launcher reports late or never, is found within about 1.2 x this); 0: off (deaths are known from MPI and STARLING_PEER_CHECK_SECONDS only)"},
    {"STARLING_GPU_PATH", nullptr, "auto",
     "how CUDA tensors move: auto (NCCL when every rank of a context has a GPU of its own and NCCL loads, else staged), staged (pinned host copies and the MPI path), nccl (fail with the reason when NCCL cannot be used)"},
    {"STARLING_GPU_CHUNK_BYTES", nullptr, "4194304",
     "bytes: the staged path copies large CUDA tensors in chunks of this size, so copies overlap communication"},
    {"STARLING_GPU_SCRATCH_BYTES", nullptr, "67108864",
     "bytes: the most device memory the NCCL path uses as scratch per operation (float16/bfloat16/int16 allreduce, floating MIN/MAX, neighbor_allreduce work in chunks that fit it) and keeps pooled per context"},
    {"STARLING_SHM", nullptr, "1",
     "1: when a context is created, ranks on one host check (with a real shared-memory segment, once per pair) that they can share memory, and starling_config_string reports the outcome per pair and why; the data of neighbor operations between such pairs then goes through shared memory (see STARLING_SHM_BUFFER_BYTES), and when every rank of the context is on one host and every pair is linked, each classic collective starts with a round on a shared-memory board that carries tensors up to 64 KiB; 0: no probe, every byte through MPI (reported as off)"},
    {"STARLING_SHM_BUFFER_BYTES", nullptr, "268435456",
     "bytes: the largest neighbor payload (one exchange's data for one peer) that goes through shared memory between ranks of one host; larger ones travel through MPI. Each rank's two buffers are reserved in /dev/shm as payloads first reach a size (at most twice the largest payload per buffer, kept until the context is destroyed); 0: neighbor data always through MPI, and no board for the classic collectives"},
    {"STARLING_SHM_MIN_BYTES", nullptr, "0",
     "bytes: neighbor payloads smaller than this travel inside their MPI message even between ranks that share memory"},
    {"STARLING_SHM_COPY", nullptr, "auto",
     "how a rank copies neighbor data into its shared-memory buffer: auto (times a plain copy and one with non-temporal stores, per size class from 16 KiB, and streams where the plain copy costs over 6x: where the reader's core must first give the cache lines back slowly), plain (memcpy) or stream (non-temporal stores)"},
    {"STARLING_SHM_PULL_BYTES", nullptr, "131072",
     "bytes: neighbor payloads from 48 KiB up to this size are read by each same-host receiver straight from the sender's tensor (one kernel copy: cross-memory attach, where the system allows it), and the sender copies nothing; other sizes, and every size where ranks outnumber the host's cores, go through the sender's shared-memory buffer; 0: never"},
    {"STARLING_DEVICE_PLUGIN", nullptr, "",
     "path of the device plugin to load on the first CUDA tensor; empty: libstarling_cuda.so beside libstarling.so (tests point this at the emulated device)"},
};

const char* Lookup(const EnvLookup& lookup, const ConfigVar& var, const char** used_name) {
  *used_name = var.name;
  const char* value = lookup(var.name);
  if ((value == nullptr || *value == '\0') && var.alias != nullptr) {
    value = lookup(var.alias);
    *used_name = var.alias;
  }
  return (value == nullptr || *value == '\0') ? nullptr : value;
}

double ParseNumber(const char* name, const char* text, double min_value) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  STARLING_CHECK_ARG(end != text && *end == '\0' && errno == 0 && std::isfinite(value) && value >= min_value,
                     name, "='", text, "' is not a number >= ", min_value);
  return value;
}

size_t ParseBytes(const char* name, const char* text, size_t min_value) {
  const double value = ParseNumber(name, text, static_cast<double>(min_value));
  STARLING_CHECK_ARG(value == std::floor(value) && value < 1e18, name, "='", text,
                     "' is not a whole number of bytes");
  return static_cast<size_t>(value);
}

LogLevel ParseLogLevel(const char* name, const char* text) {
  static const struct { const char* word; LogLevel level; } kLevels[] = {
      {"off", LogLevel::kOff},     {"none", LogLevel::kOff},   {"error", LogLevel::kError},
      {"fatal", LogLevel::kError}, {"warn", LogLevel::kWarn},  {"warning", LogLevel::kWarn},
      {"info", LogLevel::kInfo},   {"debug", LogLevel::kDebug}, {"trace", LogLevel::kTrace}};
  for (const auto& entry : kLevels) {
    if (strcasecmp(text, entry.word) == 0) return entry.level;
  }
  Fail(Code::kInvalidArgument, name, "='", text, "' is not one of off, error, warn, info, debug, trace");
}

}  // namespace

const std::vector<ConfigVar>& ConfigTable() { return kTable; }

Config ParseConfig(const EnvLookup& lookup) {
  Config config;
  const char* used = nullptr;
  for (const ConfigVar& var : kTable) {
    const char* value = Lookup(lookup, var, &used);
    if (value == nullptr) continue;
    const std::string name = var.name;
    if (name == "STARLING_LOG_LEVEL") config.log_level = ParseLogLevel(used, value);
    else if (name == "STARLING_STALL_WARNING_SECONDS") config.stall_warning_seconds = ParseNumber(used, value, 0);
    else if (name == "STARLING_TIMEOUT_SECONDS") config.timeout_seconds = ParseNumber(used, value, 0);
    else if (name == "STARLING_FUSION_THRESHOLD") config.fusion_threshold = ParseBytes(used, value, 0);
    else if (name == "STARLING_NODES_PER_MACHINE") {
      const double n = ParseNumber(used, value, 0);
      STARLING_CHECK_ARG(n == std::floor(n) && n < 1e6, used, "='", value, "' is not a whole number of ranks");
      config.nodes_per_machine = static_cast<int>(n);
    } else if (name == "STARLING_TIMELINE") config.timeline_prefix = value;
    else if (name == "STARLING_CHUNK_BYTES") {
      config.chunk_bytes = ParseBytes(used, value, 4096);
      STARLING_CHECK_ARG(config.chunk_bytes <= (size_t{1} << 30), used, "='", value, "' exceeds 1 GiB");
    } else if (name == "STARLING_INLINE_BYTES") {
      config.inline_bytes = ParseBytes(used, value, 0);
      STARLING_CHECK_ARG(config.inline_bytes <= (size_t{1} << 24), used, "='", value, "' exceeds 16 MiB");
    } else if (name == "STARLING_SPIN_MICROSECONDS") config.spin_microseconds = ParseNumber(used, value, 0);
    else if (name == "STARLING_WINDOW_POLL_MICROSECONDS") config.window_poll_microseconds = ParseNumber(used, value, 1);
    else if (name == "STARLING_PEER_CHECK_SECONDS") config.peer_check_seconds = ParseNumber(used, value, 0);
    else if (name == "STARLING_MISMATCH_CHECK_SECONDS") config.mismatch_check_seconds = ParseNumber(used, value, 0);
    else if (name == "STARLING_FT_DETECTOR_SECONDS") config.ft_detector_seconds = ParseNumber(used, value, 0);
    else if (name == "STARLING_HEARTBEAT_SECONDS") {
      config.heartbeat_seconds = ParseNumber(used, value, 0);
      STARLING_CHECK_ARG(config.heartbeat_seconds == 0 || config.heartbeat_seconds >= 0.05, used, "='", value,
                         "' is below 0.05 (seconds; 0 turns the heartbeat off)");
    }
    else if (name == "STARLING_SHM") {
      const std::string v = value;
      STARLING_CHECK_ARG(v == "0" || v == "1", used, "='", value, "' is not 0 or 1");
      config.shm = v == "1";
    } else if (name == "STARLING_SHM_BUFFER_BYTES") {
      config.shm_buffer_bytes = ParseBytes(used, value, 0);
      STARLING_CHECK_ARG(config.shm_buffer_bytes <= (size_t{1} << 40), used, "='", value, "' exceeds 1 TiB");
    } else if (name == "STARLING_SHM_MIN_BYTES") {
      config.shm_min_bytes = ParseBytes(used, value, 0);
    } else if (name == "STARLING_SHM_COPY") {
      const std::string v = value;
      STARLING_CHECK_ARG(v == "auto" || v == "plain" || v == "stream", used, "='", value,
                         "' is not one of auto, plain, stream");
      config.shm_copy = v;
    } else if (name == "STARLING_SHM_PULL_BYTES") {
      config.shm_pull_bytes = ParseBytes(used, value, 0);
    }
    else if (name == "STARLING_GPU_PATH") {
      const std::string v = value;
      STARLING_CHECK_ARG(v == "auto" || v == "staged" || v == "nccl", used, "='", value,
                         "' is not one of auto, staged, nccl");
      config.gpu_path = v;
    } else if (name == "STARLING_GPU_SCRATCH_BYTES") {
      config.gpu_scratch_bytes = ParseBytes(used, value, 4096);
      STARLING_CHECK_ARG(config.gpu_scratch_bytes <= (size_t{1} << 40), used, "='", value, "' exceeds 1 TiB");
    } else if (name == "STARLING_GPU_CHUNK_BYTES") {
      config.gpu_chunk_bytes = ParseBytes(used, value, 4096);
      STARLING_CHECK_ARG(config.gpu_chunk_bytes <= (size_t{1} << 30), used, "='", value, "' exceeds 1 GiB");
    }
  }
  return config;
}

const Config& GlobalConfig() {
  static std::once_flag once;
  static Config config;
  static std::optional<Error> error;
  std::call_once(once, [] {
    try {
      config = ParseConfig([](const char* name) { return std::getenv(name); });
      SetLogLevel(config.log_level);
    } catch (const Error& e) {
      error = e;
    }
  });
  if (error) throw *error;
  return config;
}

std::string DescribeConfig(const EnvLookup& lookup) {
  std::string out;
  for (const ConfigVar& var : kTable) {
    const char* used = nullptr;
    const char* value = Lookup(lookup, var, &used);
    out += var.name;
    out += "=";
    out += value ? value : var.default_value;
    if (value && used != var.name) out += Str(" (from ", used, ")");
    out += Str("  [default: '", var.default_value, "'", var.alias ? Str(", alias ", var.alias) : "", "]  ",
               var.doc, "\n");
  }
  return out;
}

}  // namespace starling
