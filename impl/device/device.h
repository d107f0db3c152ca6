// The device plugin as the core sees it: loaded once per process on the first CUDA
// tensor (never before, so a CPU-only program never touches CUDA), with every call's
// status turned into a starling::Error naming the call and the plugin's message.
#pragma once

#include <cstddef>
#include <string>

#include "impl/device/plugin_abi.h"

namespace starling::device {

class Plugin {
 public:
  explicit Plugin(const starling_device_plugin_t* table, std::string path) : table_(table), path_(std::move(path)) {}
  const starling_device_plugin_t& operator*() const { return *table_; }
  const starling_device_plugin_t* operator->() const { return table_; }
  const std::string& path() const { return path_; }
  // Throws Error(kDevice, "<call>: <plugin message>") unless status is 0.
  void Check(int status, const char* call) const;

 private:
  const starling_device_plugin_t* table_;
  std::string path_;
};

// The loaded and initialized plugin. Throws Error(kUnsupported) naming what is missing:
// a build without CUDA, a plugin that does not load, no driver, no device. A failure
// is remembered: later calls fail the same way without retrying.
const Plugin& Load();

// One line for the config string: "not loaded (no CUDA tensor used yet)", "<describe>
// from <path>", or "unavailable: <why>". Never loads anything.
std::string StatusLine();

// Where Load looks for the plugin, in order (for messages and the README).
std::string SearchDescription();

}  // namespace starling::device
