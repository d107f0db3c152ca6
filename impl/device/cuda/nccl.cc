// NCCL, loaded at run time: nccl_load dlopens libnccl.so.2 and resolves the functions
// below; nothing links it, so the plugin loads (and its non-NCCL half works) where NCCL
// is absent. nccl.h gives only the types and enums.
#include <dlfcn.h>
#include <nccl.h>

#include <sched.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "impl/device/cuda/errors.h"
#include "impl/device/cuda/plugin.h"
#include "impl/device/plugin_abi.h"

namespace starling::device::cuda {
namespace {

static_assert(sizeof(ncclUniqueId) == STARLING_NCCL_ID_BYTES, "plugin_abi.h's NCCL id size");

constexpr const char* kLibrary = "libnccl.so.2";

// The resolved entry points (types from nccl.h's declarations).
struct Nccl {
  decltype(&::ncclGetVersion) GetVersion;
  decltype(&::ncclGetErrorString) GetErrorString;
  decltype(&::ncclGetUniqueId) GetUniqueId;
  decltype(&::ncclCommInitRank) CommInitRank;
  decltype(&::ncclCommDestroy) CommDestroy;
  decltype(&::ncclCommAbort) CommAbort;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig;  // NCCL 2.14+; else NULL (blocking init)
  decltype(&::ncclAllReduce) AllReduce;
  decltype(&::ncclBroadcast) Broadcast;
  decltype(&::ncclAllGather) AllGather;
  decltype(&::ncclReduceScatter) ReduceScatter;
  decltype(&::ncclGroupStart) GroupStart;
  decltype(&::ncclGroupEnd) GroupEnd;
  decltype(&::ncclSend) Send;
  decltype(&::ncclRecv) Recv;
  std::string description;  // "NCCL 2.28.3"
};

std::mutex g_mutex;               // guards loading
std::string g_load_error;         // why the last nccl_load failed
std::atomic<const Nccl*> g_nccl;  // set once loaded; never unloaded

template <typename F>
bool Resolve(void* lib, const char* name, F* fn, std::string* error) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) *error = std::string(kLibrary) + " has no " + name;
  return *fn != nullptr;
}

// The loaded API, or nullptr after Fail("<what>: NCCL not loaded ...").
const Nccl* Api(const char* what) {
  const Nccl* api = g_nccl.load();
  if (api == nullptr) Fail(std::string(what) + ": NCCL is not loaded (call nccl_load first)");
  return api;
}

ncclComm_t Comm(void* comm) { return static_cast<ncclComm_t>(comm); }

// The communicator of this thread's last NCCL call (a group's, for ncclGroupEnd).
thread_local ncclComm_t t_last_comm = nullptr;

// 0, or Fail("ncclAllReduce: invalid usage (...)") with NCCL's own description. A
// non-blocking communicator (see NcclCommInit) may answer ncclInProgress while it
// connects: the call is then complete once ncclCommGetAsyncError stops saying so, which
// NCCL requires before the next call (connection setup only: bounded, unlike the waits
// for peers, which the core polls).
int CheckNccl(const Nccl* api, ncclResult_t result, const char* call, ncclComm_t comm = t_last_comm) {
  if (result == ncclInProgress && comm != nullptr) {
    do {
      sched_yield();
      if (api->CommGetAsyncError(comm, &result) != ncclSuccess) break;
    } while (result == ncclInProgress);
  }
  if (result == ncclSuccess) return 0;
  cudaGetLastError();  // NCCL may leave a CUDA error behind
  return Fail(std::string(call) + ": " + api->GetErrorString(result));
}

// NCCL takes the raw handle: NULL is its (legacy) default stream too.
cudaStream_t NcclStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// starling::DType and ReduceOp to NCCL's, or a failure naming `fn` and what has no NCCL
// equivalent.
int NcclTypeAndOp(const char* fn, int dtype, int op, ncclDataType_t* type, ncclRedOp_t* nccl_op) {
  // starling::DType order: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8.
  static const ncclDataType_t kTypes[] = {ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64, ncclInt8,
                                          ncclInt8 /* int16: refused below */, ncclInt32, ncclInt64, ncclUint8};
  if (dtype < 0 || dtype > 8 || dtype == 5)
    return Fail(std::string(fn) + ": dtype " + std::to_string(dtype) +
                " has no NCCL type (int16 and unknown dtypes)");
  *type = kTypes[dtype];
  // ReduceOp: sum 0, average 1, min 2, max 3. Average is the caller's division.
  switch (op) {
    case 0: *nccl_op = ncclSum; return 0;
    case 2: *nccl_op = ncclMin; return 0;  // fminf/fmaxf: a NaN loses (the core gathers floating MIN/MAX instead)
    case 3: *nccl_op = ncclMax; return 0;
    default:
      return Fail(std::string(fn) + ": op " + std::to_string(op) +
                  " not accepted (SUM, MIN or MAX; divide for AVERAGE)");
  }
}

}  // namespace

int NcclLoad() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_nccl.load() != nullptr) return 0;
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    g_load_error = std::string("nccl_load: ") + kLibrary + " not found (" + (why ? why : "dlopen failed") + ")";
    return Fail(g_load_error);
  }
  auto* api = new Nccl{};
  std::string error;
  const bool ok = Resolve(lib, "ncclGetVersion", &api->GetVersion, &error) &&
                  Resolve(lib, "ncclGetErrorString", &api->GetErrorString, &error) &&
                  Resolve(lib, "ncclGetUniqueId", &api->GetUniqueId, &error) &&
                  Resolve(lib, "ncclCommInitRank", &api->CommInitRank, &error) &&
                  Resolve(lib, "ncclCommDestroy", &api->CommDestroy, &error) &&
                  Resolve(lib, "ncclCommAbort", &api->CommAbort, &error) &&
                  Resolve(lib, "ncclCommGetAsyncError", &api->CommGetAsyncError, &error) &&
                  Resolve(lib, "ncclAllReduce", &api->AllReduce, &error) &&
                  Resolve(lib, "ncclBroadcast", &api->Broadcast, &error) &&
                  Resolve(lib, "ncclAllGather", &api->AllGather, &error) &&
                  Resolve(lib, "ncclReduceScatter", &api->ReduceScatter, &error) &&
                  Resolve(lib, "ncclGroupStart", &api->GroupStart, &error) &&
                  Resolve(lib, "ncclGroupEnd", &api->GroupEnd, &error) &&
                  Resolve(lib, "ncclSend", &api->Send, &error) && Resolve(lib, "ncclRecv", &api->Recv, &error);
  if (ok) api->CommInitRankConfig = reinterpret_cast<decltype(api->CommInitRankConfig)>(dlsym(lib, "ncclCommInitRankConfig"));
  int version = 0;
  if (ok && api->GetVersion(&version) != ncclSuccess) error = "ncclGetVersion failed";
  if (!error.empty()) {
    delete api;
    dlclose(lib);
    g_load_error = "nccl_load: " + error;
    return Fail(g_load_error);
  }
  // Since NCCL 2.9: major * 10000 + minor * 100 + patch; before, major * 1000 + minor * 100 + patch.
  const bool old_code = version < 20900;
  const int major = old_code ? version / 1000 : version / 10000;
  const int minor = old_code ? version / 100 % 10 : version / 100 % 100;
  api->description = "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(version % 100);
  g_nccl.store(api);  // kept for the life of the process, like the library
  return 0;
}

const char* NcclDescribe() {
  const Nccl* api = g_nccl.load();
  return api != nullptr ? api->description.c_str() : "NCCL (not loaded)";
}

int NcclUniqueId(void* id) {
  const Nccl* api = Api("nccl_unique_id");
  if (api == nullptr) return 1;
  ncclUniqueId unique{};
  if (int rc = CheckNccl(api, api->GetUniqueId(&unique), "ncclGetUniqueId")) return rc;
  std::memcpy(id, &unique, sizeof unique);
  return 0;
}

int NcclCommInit(void** comm, int nranks, const void* id, int rank, int device) {
  *comm = nullptr;
  const Nccl* api = Api("nccl_comm_init");
  if (api == nullptr) return 1;
  // NCCL binds the communicator to the current device.
  if (int rc = SetDevice(device)) return rc;
  ncclUniqueId unique;
  std::memcpy(&unique, id, sizeof unique);
  ncclComm_t c = nullptr;
  if (api->CommInitRankConfig != nullptr) {
    // Non-blocking: returns ncclInProgress at once; the core polls nccl_comm_status
    // under its wait monitor, so a timeout or an abort ends an init whose peers never come.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = api->CommInitRankConfig(&c, nranks, unique, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      cudaGetLastError();
      if (c != nullptr) api->CommAbort(c);
      return Fail(std::string("ncclCommInitRankConfig: ") + api->GetErrorString(r));
    }
  } else if (int rc = CheckNccl(api, api->CommInitRank(&c, nranks, unique, rank), "ncclCommInitRank", nullptr)) {
    return rc;  // before NCCL 2.14: blocking
  }
  *comm = c;
  return 0;
}

int NcclCommStatus(void* comm, int* state) {
  const Nccl* api = Api("nccl_comm_status");
  if (api == nullptr) return 1;
  if (comm == nullptr || state == nullptr) return Fail("nccl_comm_status: comm or state is NULL");
  ncclResult_t async = ncclSuccess;
  if (int rc = CheckNccl(api, api->CommGetAsyncError(Comm(comm), &async), "ncclCommGetAsyncError", nullptr)) return rc;
  *state = async == ncclSuccess ? 0 : async == ncclInProgress ? 1 : 2;
  if (*state == 2) Fail(std::string("ncclCommGetAsyncError: ") + api->GetErrorString(async));
  return 0;
}

int NcclCommDestroy(void* comm) {
  const Nccl* api = Api("nccl_comm_destroy");
  return api == nullptr ? 1 : CheckNccl(api, api->CommDestroy(Comm(comm)), "ncclCommDestroy", nullptr);
}

int NcclCommAbort(void* comm) {
  const Nccl* api = Api("nccl_comm_abort");
  return api == nullptr ? 1 : CheckNccl(api, api->CommAbort(Comm(comm)), "ncclCommAbort", nullptr);
}

int NcclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream) {
  const Nccl* api = Api("nccl_all_reduce");
  if (api == nullptr) return 1;
  ncclDataType_t type;
  ncclRedOp_t nccl_op;
  if (int rc = NcclTypeAndOp("nccl_all_reduce", dtype, op, &type, &nccl_op)) return rc;
  t_last_comm = Comm(comm);
  return CheckNccl(api, api->AllReduce(send, recv, count, type, nccl_op, Comm(comm), NcclStream(stream)),
                   "ncclAllReduce");
}

int NcclReduceScatter(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream) {
  const Nccl* api = Api("nccl_reduce_scatter");
  if (api == nullptr) return 1;
  ncclDataType_t type;
  ncclRedOp_t nccl_op;
  if (int rc = NcclTypeAndOp("nccl_reduce_scatter", dtype, op, &type, &nccl_op)) return rc;
  t_last_comm = Comm(comm);
  return CheckNccl(api, api->ReduceScatter(send, recv, count, type, nccl_op, Comm(comm), NcclStream(stream)),
                   "ncclReduceScatter");
}

int NcclBroadcast(const void* send, void* recv, size_t bytes, int root, void* comm, void* stream) {
  const Nccl* api = Api("nccl_broadcast");
  if (api == nullptr) return 1;
  t_last_comm = Comm(comm);
  return CheckNccl(api, api->Broadcast(send, recv, bytes, ncclUint8, root, Comm(comm), NcclStream(stream)),
                   "ncclBroadcast");
}

int NcclAllGather(const void* send, void* recv, size_t bytes, void* comm, void* stream) {
  const Nccl* api = Api("nccl_all_gather");
  if (api == nullptr) return 1;
  t_last_comm = Comm(comm);
  return CheckNccl(api, api->AllGather(send, recv, bytes, ncclUint8, Comm(comm), NcclStream(stream)),
                   "ncclAllGather");
}

int NcclGroupStart() {
  const Nccl* api = Api("nccl_group_start");
  return api == nullptr ? 1 : CheckNccl(api, api->GroupStart(), "ncclGroupStart", nullptr);
}

int NcclGroupEnd() {
  const Nccl* api = Api("nccl_group_end");
  return api == nullptr ? 1 : CheckNccl(api, api->GroupEnd(), "ncclGroupEnd");
}

int NcclSend(const void* buf, size_t bytes, int peer, void* comm, void* stream) {
  const Nccl* api = Api("nccl_send");
  if (api == nullptr) return 1;
  t_last_comm = Comm(comm);
  return CheckNccl(api, api->Send(buf, bytes, ncclUint8, peer, Comm(comm), NcclStream(stream)), "ncclSend");
}

int NcclRecv(void* buf, size_t bytes, int peer, void* comm, void* stream) {
  const Nccl* api = Api("nccl_recv");
  if (api == nullptr) return 1;
  t_last_comm = Comm(comm);
  return CheckNccl(api, api->Recv(buf, bytes, ncclUint8, peer, Comm(comm), NcclStream(stream)), "ncclRecv");
}

}  // namespace starling::device::cuda
