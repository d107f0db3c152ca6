#include "common.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <limits>

namespace starling::emu {

namespace {

thread_local std::string t_last_error = "no error";
thread_local int t_current_device = 0;
thread_local int t_runtime_error = kRtSuccess;
std::atomic<unsigned> g_context_devices{0};

std::string VFormat(const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  return out;
}

// A non-negative integer variable; a malformed value is kept as an error for init().
void ReadInt(const char* name, int min, int* out, std::string* error) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > std::numeric_limits<int>::max()) {
    if (error->empty()) *error = Format("%s=%s is not an integer >= %d", name, value, min);
    return;
  }
  *out = static_cast<int>(v);
}

Settings ReadSettings() {
  Settings s;
  ReadInt("STARLING_EMU_DEVICES", 0, &s.devices, &s.settings_error);
  ReadInt("STARLING_EMU_DELAY_US", 0, &s.delay_us, &s.settings_error);
  int flag = 0;
  ReadInt("STARLING_EMU_NO_NCCL", 0, &flag, &s.settings_error);
  s.no_nccl = flag != 0;
  flag = 1;
  ReadInt("STARLING_EMU_POISON", 0, &flag, &s.settings_error);
  s.poison = flag != 0;
  if (const char* t = std::getenv("STARLING_EMU_NCCL_TIMEOUT"); t != nullptr && *t != '\0') {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (*end != '\0' || !(v > 0)) {
      if (s.settings_error.empty()) s.settings_error = Format("STARLING_EMU_NCCL_TIMEOUT=%s is not a positive number", t);
    } else {
      s.nccl_timeout_s = v;
    }
  }
  if (const char* id = std::getenv("STARLING_EMU_IDENTITY")) s.identity = id;
  if (const char* m = std::getenv("STARLING_EMU_DEVICE_MEMORY"); m != nullptr && *m != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(m, &end, 10);
    if (*end != '\0' || v == 0) {
      if (s.settings_error.empty()) s.settings_error = Format("STARLING_EMU_DEVICE_MEMORY=%s is not a byte count > 0", m);
    } else {
      s.device_memory = static_cast<size_t>(v);
    }
  }
  ReadInt("STARLING_EMU_NCCL_STALL_RANK", 0, &s.nccl_stall_rank, &s.settings_error);
  if (const char* loss = std::getenv("STARLING_EMU_NCCL_PEER_LOSS"); loss != nullptr && *loss != '\0') {
    const std::string v = loss;
    if (v == "error") s.nccl_peer_loss_error = true;
    else if (v != "hang" && s.settings_error.empty())
      s.settings_error = Format("STARLING_EMU_NCCL_PEER_LOSS=%s is not hang or error", loss);
  }
  return s;
}

}  // namespace

int Fail(const std::string& message) {
  t_last_error = message;
  return 1;
}

int Fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  t_last_error = VFormat(format, args);
  va_end(args);
  return 1;
}

const char* LastError() { return t_last_error.c_str(); }

std::string Format(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string out = VFormat(format, args);
  va_end(args);
  return out;
}

std::string Hex(const void* p) { return Format("%p", p); }

const Settings& GetSettings() {
  // Never destroyed: stream workers and NCCL readers may read it while the process exits.
  static const Settings* settings = new Settings(ReadSettings());
  return *settings;
}

int CurrentDevice() { return t_current_device; }

std::string LauncherRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return v;
  return "0";
}

void UseDevice(int device) {
  if (device >= 0 && device < 32) g_context_devices.fetch_or(1u << device);
}
unsigned ContextDevices() { return g_context_devices.load(); }

void SetRuntimeError(int code) { t_runtime_error = code; }
int TakeRuntimeError() {
  const int code = t_runtime_error;
  t_runtime_error = kRtSuccess;
  return code;
}
const char* RuntimeErrorName(int code) {
  switch (code) {
    case kRtSuccess: return "no error";
    case kRtNotReady: return "device not ready";
    case kRtLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
  }
}
void SetCurrentDevice(int device) { t_current_device = device; }
bool ValidDevice(int device) { return device >= 0 && device < GetSettings().devices; }

size_t DTypeSize(int dtype) {
  static const size_t kSizes[kNumDTypes] = {2, 2, 4, 8, 1, 2, 4, 8, 1};
  return dtype >= 0 && dtype < kNumDTypes ? kSizes[dtype] : 0;
}

const char* DTypeName(int dtype) {
  static const char* const kNames[kNumDTypes] = {"float16", "bfloat16", "float32", "float64", "int8",
                                                 "int16",   "int32",    "int64",   "uint8"};
  return dtype >= 0 && dtype < kNumDTypes ? kNames[dtype] : "unknown dtype";
}

bool ElementBytes(size_t n, int dtype, size_t* bytes) {
  const size_t size = DTypeSize(dtype);
  if (size == 0 || n > std::numeric_limits<size_t>::max() / size) return false;
  *bytes = n * size;
  return true;
}

}  // namespace starling::emu
