#include "impl/device/device.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "impl/common/error.h"

namespace starling::device {
namespace {

constexpr const char* kPluginName = "libstarling_cuda.so";

struct State {
  std::mutex mutex;
  bool tried = false;
  const Plugin* plugin = nullptr;  // leaked on purpose: the plugin stays loaded until exit
  std::string failure;
};

State& Global() {
  static State* state = new State;  // never destroyed: plugin handles outlive static destructors
  return *state;
}

// The directory of the library this code is linked into (libstarling.so), with a slash.
std::string OwnDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Load), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

const starling_device_plugin_t* Open(const std::string& path, std::string* why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    *why = err ? err : "dlopen failed";
    return nullptr;
  }
  auto entry = reinterpret_cast<starling_device_plugin_entry_t>(dlsym(handle, STARLING_DEVICE_PLUGIN_ENTRY));
  if (entry == nullptr) {
    *why = Str(path, " has no ", STARLING_DEVICE_PLUGIN_ENTRY, " (not a Starling device plugin)");
    return nullptr;
  }
  const starling_device_plugin_t* table = entry();
  if (table == nullptr || table->abi_version != STARLING_DEVICE_ABI_VERSION ||
      table->struct_size < sizeof(starling_device_plugin_t)) {
    *why = Str(path, " is a device plugin for another version of Starling (ABI ",
               table ? table->abi_version : -1, ", this library needs ", STARLING_DEVICE_ABI_VERSION, ")");
    return nullptr;
  }
  return table;
}

void LoadOnce(State& state) {
  std::string path;
  const char* env = std::getenv("STARLING_DEVICE_PLUGIN");
  std::string why;
  const starling_device_plugin_t* table = nullptr;
  if (env != nullptr && *env != '\0') {
    path = env;
    table = Open(path, &why);
    if (!table) {
      state.failure = Str("STARLING_DEVICE_PLUGIN=", path, " could not be loaded: ", why);
      return;
    }
  } else {
    path = OwnDirectory() + kPluginName;
    table = Open(path, &why);
    if (!table) {
      state.failure = Str("CUDA tensors need ", kPluginName, ", which could not be loaded from ", path, " (", why,
                          "); this build of Starling may have been configured without the CUDA toolkit "
                          "(STARLING_WITH_CUDA=ON requires it)");
      return;
    }
  }
  if (table->init() != 0) {
    state.failure = Str("no usable GPU: ", table->last_error(), " (device plugin ", path, ")");
    return;
  }
  state.plugin = new Plugin(table, path);
}

}  // namespace

void Plugin::Check(int status, const char* call) const {
  if (status != 0) Fail(Code::kDevice, call, ": ", table_->last_error());
}

const Plugin& Load() {
  State& state = Global();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.tried) {
    LoadOnce(state);
    state.tried = true;
  }
  if (state.plugin == nullptr) Fail(Code::kUnsupported, state.failure);
  return *state.plugin;
}

std::string StatusLine() {
  State& state = Global();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.plugin != nullptr) return Str((*state.plugin)->describe(), " from ", state.plugin->path());
  if (!state.failure.empty()) return "unavailable: " + state.failure;
  return "not loaded (no CUDA tensor used yet)";
}

std::string SearchDescription() {
  return Str("$STARLING_DEVICE_PLUGIN, else ", OwnDirectory(), kPluginName);
}

}  // namespace starling::device
