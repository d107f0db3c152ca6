// One-sided windows: glue only.
#include <cmath>
#include <cstring>

#include "capi/private/launch.h"
#include "impl/windows/ops.h"

using namespace starling;
using namespace starling::capi;

namespace {

struct WindowEntry {
  std::shared_ptr<runtime::Context> context;
  std::shared_ptr<windows::Window> window;
};

HandleTable<WindowEntry, starling_window_t>& Windows() {
  static auto* table = new HandleTable<WindowEntry, starling_window_t>("window");
  return *table;
}

// A local update; only an update under the mutexes can wait for peers.
void Update(WindowEntry& entry, const windows::UpdateWeights& args, const char* what) {
  entry.context->CheckUsable();
  entry.window->Update(args, windows::AssociatedP(*entry.context), what);
}

windows::TransferArgs ParseTransfer(const starling_window_args_t* args) {
  windows::TransferArgs parsed;
  if (args == nullptr) return parsed;
  const starling_window_args_t a =
      CopyOptions(args, starling_window_args_t STARLING_WINDOW_ARGS_INIT,
                  offsetof(starling_window_args_t, require_mutex) + sizeof(int), "args", "STARLING_WINDOW_ARGS_INIT");
  parsed.ranks = CopyArray(a.ranks, a.num_ranks, "ranks");
  if (a.weights != nullptr) parsed.weights = CopyArray(a.weights, a.num_ranks, "weights");
  parsed.self_weight = a.self_weight;
  STARLING_CHECK_ARG(a.require_mutex == 0 || a.require_mutex == 1, "args->require_mutex must be 0 or 1");
  parsed.require_mutex = a.require_mutex == 1;
  return parsed;
}

windows::UpdateWeights ParseUpdate(const starling_window_update_args_t* args, const windows::Window& window) {
  windows::UpdateWeights parsed;
  if (args == nullptr) return parsed;
  const starling_window_update_args_t a = CopyOptions(
      args, starling_window_update_args_t STARLING_WINDOW_UPDATE_ARGS_INIT,
      offsetof(starling_window_update_args_t, require_mutex) + sizeof(int), "args", "STARLING_WINDOW_UPDATE_ARGS_INIT");
  STARLING_CHECK_ARG(a.use_weights == 0 || a.use_weights == 1, "args->use_weights must be 0 or 1");
  parsed.use_weights = a.use_weights == 1;
  parsed.self_weight = a.self_weight;
  parsed.ranks = CopyArray(a.ranks, a.num_ranks, "ranks");
  if (parsed.use_weights) {
    parsed.weights = CopyArray(a.weights, a.num_ranks, "weights");
    STARLING_CHECK_ARG(std::isfinite(a.self_weight) && a.self_weight >= 0, "self_weight ", a.self_weight,
                       " must be finite and >= 0");
    for (double w : parsed.weights)
      STARLING_CHECK_ARG(std::isfinite(w) && w >= 0, "window weight ", w, " must be finite and >= 0");
    windows::CheckInNeighbors(window, parsed.ranks, "update");
  } else {
    STARLING_CHECK_ARG(a.num_ranks == 0, "ranks are given but use_weights is 0");
  }
  parsed.reset = a.reset != 0;
  parsed.require_mutex = a.require_mutex != 0;
  return parsed;
}

template <typename Make>
starling_status_t LaunchOnWindow(starling_window_t win, starling_request_t* req, bool nonblocking, Make make) {
  STARLING_API_BEGIN();
  if (nonblocking) {
    CheckOut(req, "req");
    *req = nullptr;
  }
  std::shared_ptr<WindowEntry> entry = Windows().Get(win);
  std::unique_ptr<runtime::Op> op = make(*entry);
  if (nonblocking) {
    RunNonblocking(entry->context, std::move(op), req);
  } else {
    RunBlocking(*entry->context, std::move(op));
  }
  STARLING_API_END();
}

starling_status_t Transfer(starling_window_t win, DLTensor* tensor, const starling_window_args_t* args,
                           starling_request_t* req, bool nonblocking, windows::Transfer kind) {
  return LaunchOnWindow(win, req, nonblocking, [&](WindowEntry& e) {
    if (kind == windows::Transfer::kGet)
      return windows::MakeTransfer(*e.context, e.window, kind, nullptr, ParseTransfer(args));
    const windows::TransferArgs parsed = ParseTransfer(args);
    // The sender scales its own tensor by self_weight after sending: then it is written.
    const device::TensorArg arg{ViewOf(tensor, "tensor"),
                                parsed.self_weight == 1.0 ? device::Role::kIn : device::Role::kInOut, "tensor"};
    return device::Route(*e.context, {arg}, device::RouteOptions{}, [&](const Views& v) {
      return windows::MakeTransfer(*e.context, e.window, kind, &v[0], parsed);
    });
  });
}

}  // namespace

extern "C" {

STARLING_API starling_status_t starling_window_create(starling_context_t ctx, DLTensor* tensor, const char* name,
                                                      int zero_init, starling_window_t* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = nullptr;
  STARLING_CHECK_ARG(name != nullptr, "name must not be NULL");
  STARLING_CHECK_ARG(zero_init == 0 || zero_init == 1, "zero_init must be 0 or 1");
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  RunBlocking(*context, windows::MakeCreate(*context, ViewOf(tensor, "tensor"), name, zero_init == 1));
  auto entry = std::make_shared<WindowEntry>();
  entry->context = context;
  entry->window = windows::FindWindow(*context, name);
  std::shared_ptr<windows::Window> window = entry->window;
  *out = Windows().Add(std::move(entry));
  window->handle = reinterpret_cast<uintptr_t>(*out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_free(starling_window_t win) {
  STARLING_API_BEGIN();
  std::shared_ptr<WindowEntry> entry = Windows().Get(win);
  if (entry->context->local_teardown()) {
    // Aborted or a peer is gone: the collective free cannot happen. Release the handle;
    // the window's memory goes with the context's destroy.
    Windows().Take(win);
    return STARLING_SUCCESS;
  }
  RunBlocking(*entry->context, windows::MakeFree(*entry->context, entry->window));
  Windows().Take(win);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_lookup(starling_context_t ctx, const char* name,
                                                      starling_window_t* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = nullptr;
  STARLING_CHECK_ARG(name != nullptr, "name must not be NULL");
  std::shared_ptr<windows::Window> window = windows::FindWindow(*Contexts().Get(ctx), name);
  STARLING_CHECK(window != nullptr, Code::kNotFound, "no window named '", name, "'");
  *out = reinterpret_cast<starling_window_t>(static_cast<uintptr_t>(window->handle));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_names(starling_context_t ctx, char* buffer, size_t capacity,
                                                     size_t* length) {
  STARLING_API_BEGIN();
  CheckOut(length, "length");
  std::string text;
  for (const std::string& name : windows::WindowNames(*Contexts().Get(ctx))) text += (text.empty() ? "" : "\n") + name;
  *length = text.size();
  STARLING_CHECK_ARG(capacity == 0 || buffer != nullptr, "buffer is NULL but capacity is ", capacity);
  STARLING_CHECK_ARG(capacity >= text.size() + 1 || (buffer == nullptr && capacity == 0 && text.empty()),
                     "capacity ", capacity, " is too small: the names need ", text.size() + 1, " bytes");
  if (buffer != nullptr) std::memcpy(buffer, text.c_str(), text.size() + 1);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_put(starling_window_t win, DLTensor* tensor,
                                                   const starling_window_args_t* args) {
  return Transfer(win, tensor, args, nullptr, false, windows::Transfer::kPut);
}
STARLING_API starling_status_t starling_window_put_nonblocking(starling_window_t win, DLTensor* tensor,
                                                               const starling_window_args_t* args,
                                                               starling_request_t* req) {
  return Transfer(win, tensor, args, req, true, windows::Transfer::kPut);
}
STARLING_API starling_status_t starling_window_accumulate(starling_window_t win, DLTensor* tensor,
                                                          const starling_window_args_t* args) {
  return Transfer(win, tensor, args, nullptr, false, windows::Transfer::kAccumulate);
}
STARLING_API starling_status_t starling_window_accumulate_nonblocking(starling_window_t win, DLTensor* tensor,
                                                                      const starling_window_args_t* args,
                                                                      starling_request_t* req) {
  return Transfer(win, tensor, args, req, true, windows::Transfer::kAccumulate);
}
STARLING_API starling_status_t starling_window_get(starling_window_t win, const starling_window_args_t* args) {
  return Transfer(win, nullptr, args, nullptr, false, windows::Transfer::kGet);
}
STARLING_API starling_status_t starling_window_get_nonblocking(starling_window_t win,
                                                               const starling_window_args_t* args,
                                                               starling_request_t* req) {
  return Transfer(win, nullptr, args, req, true, windows::Transfer::kGet);
}

STARLING_API starling_status_t starling_window_update(starling_window_t win,
                                                      const starling_window_update_args_t* args) {
  STARLING_API_BEGIN();
  std::shared_ptr<WindowEntry> entry = Windows().Get(win);
  Update(*entry, ParseUpdate(args, *entry->window), "window_update");
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_update_then_collect(starling_window_t win, int require_mutex) {
  STARLING_API_BEGIN();
  std::shared_ptr<WindowEntry> entry = Windows().Get(win);
  windows::UpdateWeights collect;
  collect.use_weights = true;
  collect.self_weight = 1.0;
  collect.ranks = entry->window->in_neighbors();
  collect.weights.assign(collect.ranks.size(), 1.0);
  collect.reset = true;
  collect.require_mutex = require_mutex != 0;
  Update(*entry, collect, "window_update_then_collect");
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_versions(starling_window_t win, int* ranks, int64_t* versions,
                                                        int capacity, int* count) {
  STARLING_API_BEGIN();
  CheckOut(count, "count");
  std::shared_ptr<WindowEntry> entry = Windows().Get(win);
  const std::vector<int>& in = entry->window->in_neighbors();
  const std::vector<int64_t> v = entry->window->Versions();
  CheckArray(ranks, capacity, "ranks");
  CheckArray(versions, capacity, "versions");
  SetNeighborCount(entry->context->rank(), in.size(), capacity, count, /*in=*/true);
  for (size_t i = 0; i < in.size(); ++i) {
    ranks[i] = in[i];
    versions[i] = v[i];
  }
  STARLING_API_END();
}

static starling_status_t Mutex(starling_window_t win, const int* ranks, int count, int for_self, bool acquire) {
  STARLING_API_BEGIN();
  STARLING_CHECK_ARG(for_self == 0 || for_self == 1, "for_self must be 0 or 1");
  std::shared_ptr<WindowEntry> entry = Windows().Get(win);
  std::vector<int> list = CopyArray(ranks, count, "ranks");
  if (for_self) {
    if (list.empty()) list = entry->window->in_neighbors();
    const int size = entry->context->size();
    for (int r : list) STARLING_CHECK_ARG(r >= 0 && r < size, "rank ", r, " is out of range [0, ", size, ")");
    if (acquire) {
      entry->context->CheckUsable();
      entry->window->LockOwnSlots(list, "window_mutex_acquire");
    } else {
      entry->window->UnlockOwnSlots(list);
    }
  } else {
    RunBlocking(*entry->context, windows::MakeRemoteMutex(*entry->context, entry->window, list, acquire));
  }
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_mutex_acquire(starling_window_t win, const int* ranks, int count,
                                                             int for_self) {
  return Mutex(win, ranks, count, for_self, true);
}
STARLING_API starling_status_t starling_window_mutex_release(starling_window_t win, const int* ranks, int count,
                                                             int for_self) {
  return Mutex(win, ranks, count, for_self, false);
}

STARLING_API starling_status_t starling_set_window_associated_p_enabled(starling_context_t ctx, int enabled) {
  STARLING_API_BEGIN();
  STARLING_CHECK_ARG(enabled == 0 || enabled == 1, "enabled must be 0 or 1");
  windows::SetAssociatedP(*Contexts().Get(ctx), enabled == 1);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_associated_p(starling_window_t win, double* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = Windows().Get(win)->window->p();
  STARLING_API_END();
}

STARLING_API starling_status_t starling_window_set_associated_p(starling_window_t win, double p) {
  STARLING_API_BEGIN();
  STARLING_CHECK_ARG(std::isfinite(p), "p must be finite, got ", p);
  Windows().Get(win)->window->set_p(p);
  STARLING_API_END();
}

}  // extern "C"
