// Loads libstarling_emudevice.so the way the core does (dlopen by path, then the
// starling_device_plugin_v1 table) and looks up its test helpers, for the gpu tests.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "emulator.h"
#include "impl/device/plugin_abi.h"

namespace starling::emu_test {

struct Emulator {
  const starling_device_plugin_t* t = nullptr;
  decltype(&starling_emu_alloc) alloc = nullptr;
  decltype(&starling_emu_alloc_managed) alloc_managed = nullptr;
  decltype(&starling_emu_free) free = nullptr;
  decltype(&starling_emu_memcpy) memcpy = nullptr;
  decltype(&starling_emu_stream_create) stream_create = nullptr;
  decltype(&starling_emu_stream_destroy) stream_destroy = nullptr;
  decltype(&starling_emu_sleep_on_stream) sleep_on_stream = nullptr;
  decltype(&starling_emu_fill_on_stream) fill_on_stream = nullptr;
  decltype(&starling_emu_fail_on_stream) fail_on_stream = nullptr;
  decltype(&starling_emu_stream_synchronize) stream_synchronize = nullptr;
  decltype(&starling_emu_live_allocations) live_allocations = nullptr;
  decltype(&starling_emu_last_error) last_error = nullptr;
  decltype(&starling_emu_context_devices) context_devices = nullptr;
  decltype(&starling_emu_device_bytes_in_use) device_bytes_in_use = nullptr;
  decltype(&starling_emu_concurrent_nccl_ops) concurrent_nccl_ops = nullptr;
};

// Loaded once per process (the library is never unloaded); exits on failure, since no
// test can run without it.
inline const Emulator& Emu() {
  static const Emulator emu = [] {
    Emulator e;
    void* lib = dlopen(STARLING_EMU_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "dlopen %s: %s\n", STARLING_EMU_LIBRARY, dlerror());
      std::exit(2);
    }
    auto find = [lib](const char* name) {
      void* sym = dlsym(lib, name);
      if (sym == nullptr) {
        std::fprintf(stderr, "%s: no symbol %s\n", STARLING_EMU_LIBRARY, name);
        std::exit(2);
      }
      return sym;
    };
    auto entry = reinterpret_cast<starling_device_plugin_entry_t>(find(STARLING_DEVICE_PLUGIN_ENTRY));
    e.t = entry();
#define STARLING_EMU_FIND(field) e.field = reinterpret_cast<decltype(e.field)>(find("starling_emu_" #field))
    STARLING_EMU_FIND(alloc);
    STARLING_EMU_FIND(alloc_managed);
    STARLING_EMU_FIND(free);
    STARLING_EMU_FIND(memcpy);
    STARLING_EMU_FIND(stream_create);
    STARLING_EMU_FIND(stream_destroy);
    STARLING_EMU_FIND(sleep_on_stream);
    STARLING_EMU_FIND(fill_on_stream);
    STARLING_EMU_FIND(fail_on_stream);
    STARLING_EMU_FIND(stream_synchronize);
    STARLING_EMU_FIND(live_allocations);
    STARLING_EMU_FIND(last_error);
    STARLING_EMU_FIND(context_devices);
    STARLING_EMU_FIND(device_bytes_in_use);
    STARLING_EMU_FIND(concurrent_nccl_ops);
#undef STARLING_EMU_FIND
    return e;
  }();
  return emu;
}

// nccl_comm_init is non-blocking: waits until the communicator is ready (0) or failed
// (2, the message in last_error); returns that state.
inline int WaitReady(void* comm) {
  int state = 1;
  while (state == 1)
    if (Emu().t->nccl_comm_status(comm, &state) != 0) return 2;
  return state;
}

}  // namespace starling::emu_test
