#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common.h"
#include "impl/device/kernels/host_kernels.h"
#include "memory.h"
#include "nccl.h"
#include "nccl_comm.h"
#include "stream.h"

namespace starling::emu {

namespace {

std::atomic<bool> g_loaded{false};

struct CommRegistry {
  std::mutex mu;
  std::map<void*, std::shared_ptr<Comm>> comms;
  // Destroyed or aborted communicators, kept so that their addresses are never reused:
  // a second destroy or abort of one is a use after free on a GPU, and fatal here.
  std::map<void*, std::shared_ptr<Comm>> freed;
  // NCCL operations running now, by device and communicator; overlaps counted.
  std::map<int, std::map<Comm*, int>> running;
  int overlaps = 0;
  std::map<std::string, int> calls;  // accepted calls by function name
};

CommRegistry& Comms() {
  static CommRegistry* registry = new CommRegistry;  // never destroyed: readers may run at exit
  return *registry;
}

enum class OpType { kAllReduce, kReduceScatter, kBroadcast, kAllGather, kSend, kRecv };

// One NCCL call, as checked at the call and run by a stream task.
struct Op {
  const char* fn = "";
  OpType type = OpType::kSend;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements (all_reduce; reduce_scatter: of one block) or bytes
  size_t bytes = 0;  // of one rank's send buffer
  int dtype = -1, op = -1, root = -1, peer = -1;
  std::shared_ptr<Comm> comm;
  uint64_t seq = 0;  // sends: which of our messages to peer this is
};

// Counts an operation as queued on its communicator until the task that holds it is gone
// (run, or skipped because its stream failed), so that destroy can wait for it.
class InFlight {
 public:
  explicit InFlight(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) { comm_->Begin(); }
  ~InFlight() { comm_->End(); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::shared_ptr<Comm> comm_;
};

thread_local int t_group_depth = 0;  // NCCL's groups are per thread, and nest
thread_local std::vector<std::pair<std::shared_ptr<Stream>, Op>> t_group_ops;

uint32_t CollOf(OpType type) {
  switch (type) {
    case OpType::kAllReduce: return kAllReduce;
    case OpType::kReduceScatter: return kReduceScatter;
    case OpType::kBroadcast: return kBroadcast;
    default: return kAllGather;
  }
}

// The frame that carries (or, with payload 0, only names) a rank's part of a collective.
Frame CollFrame(const Op& op, uint64_t payload) {
  Frame f;
  f.kind = kColl;
  f.coll = CollOf(op.type);
  f.dtype = op.dtype;
  f.op = op.op;
  f.root = op.root;
  f.count = op.count;
  f.payload = payload;
  return f;
}

std::string Describe(const Frame& f) {
  static const char* const kOps[] = {"sum", "average", "min", "max"};
  const unsigned long long count = f.count;
  switch (f.coll) {
    case kAllReduce:
      return Format("all_reduce(count %llu, %s, %s)", count, DTypeName(f.dtype),
                    f.op >= 0 && f.op < 4 ? kOps[f.op] : "?");
    case kReduceScatter:
      return Format("reduce_scatter(count %llu, %s, %s)", count, DTypeName(f.dtype),
                    f.op >= 0 && f.op < 4 ? kOps[f.op] : "?");
    case kBroadcast: return Format("broadcast(%llu bytes, root %d)", count, f.root);
    case kAllGather: return Format("all_gather(%llu bytes)", count);
    default: return "an unknown collective";
  }
}

// The next collective frame from peer, which must name the same call as ours.
std::string TakeColl(const Op& op, int peer, Message* m) {
  if (std::string error = op.comm->Take(peer, Channel::kColl, m); !error.empty()) return error;
  const Frame mine = CollFrame(op, 0);
  const Frame& theirs = m->frame;
  if (theirs.coll != mine.coll || theirs.dtype != mine.dtype || theirs.op != mine.op || theirs.root != mine.root ||
      theirs.count != mine.count)
    return Format("mismatched collectives: rank %d called %s, rank %d %s", peer, Describe(theirs).c_str(),
                  op.comm->rank(), Describe(mine).c_str());
  return "";
}

// First phase: everything this rank sends, so that no rank waits before it has sent.
std::string Issue(Op& op) {
  Comm& c = *op.comm;
  if (op.type == OpType::kSend) {
    op.seq = c.CountSend(op.peer);
    Frame f;
    f.kind = kP2P;
    f.count = f.payload = op.bytes;
    return c.Send(op.peer, f, op.send);
  }
  if (op.type == OpType::kRecv) return "";
  const bool carries = op.type != OpType::kBroadcast || c.rank() == op.root;
  const Frame f = CollFrame(op, carries ? op.bytes : 0);
  for (int p = 0; p < c.nranks(); ++p) {
    if (p == c.rank()) continue;
    if (std::string error = c.Send(p, f, op.send); !error.empty()) return error;
  }
  return "";
}

// NCCL's MIN/MAX of floating types is fminf/fmaxf (fmin/fmax for double; the half types
// through float): a NaN loses to a number, unlike Starling's own min/max, where a NaN
// wins. Returns false for the ops and dtypes it does not handle.
template <class T>
void FminFmaxOf(T* acc, const T* part, size_t n, bool is_min) {
  for (size_t i = 0; i < n; ++i) acc[i] = is_min ? std::fmin(acc[i], part[i]) : std::fmax(acc[i], part[i]);
}

bool FminFmax(void* acc, const void* part, const Op& op) {
  if (op.op != kMin && op.op != kMax) return false;
  const bool is_min = op.op == kMin;
  switch (op.dtype) {
    case kFloat32: FminFmaxOf(static_cast<float*>(acc), static_cast<const float*>(part), op.count, is_min); return true;
    case kFloat64: FminFmaxOf(static_cast<double*>(acc), static_cast<const double*>(part), op.count, is_min); return true;
    case kFloat16:
    case kBFloat16: {
      std::vector<float> a(op.count), b(op.count);
      device::kernels::HostConvert(a.data(), kFloat32, acc, op.dtype, op.count);
      device::kernels::HostConvert(b.data(), kFloat32, part, op.dtype, op.count);
      FminFmaxOf(a.data(), b.data(), op.count, is_min);
      device::kernels::HostConvert(acc, op.dtype, a.data(), kFloat32, op.count);
      return true;
    }
    default: return false;
  }
}

std::string CompleteAllReduce(const Op& op) {
  Comm& c = *op.comm;
  std::vector<std::vector<char>> parts(c.nranks());
  for (int p = 0; p < c.nranks(); ++p) {
    if (p == c.rank()) continue;
    Message m;
    if (std::string error = TakeColl(op, p, &m); !error.empty()) return error;
    parts[p] = std::move(m.data);
  }
  // Rank order 0..n-1 on every rank: the same additions in the same order, the same bits.
  const char* self = static_cast<const char*>(op.send);
  std::vector<char> sum = c.rank() == 0 ? std::vector<char>(self, self + op.bytes) : std::move(parts[0]);
  for (int r = 1; r < c.nranks(); ++r) {
    const void* part = r == c.rank() ? op.send : parts[r].data();
    if (FminFmax(sum.data(), part, op)) continue;
    if (device::kernels::HostReduce(sum.data(), part, op.count, op.dtype, op.op) != 0)
      return Format("HostReduce rejected %s, op %d", DTypeName(op.dtype), op.op);
  }
  if (op.bytes > 0) std::memcpy(op.recv, sum.data(), op.bytes);
  return "";
}

// Every rank sent its whole input; this rank reduces its own block of them, in rank order
// as all_reduce. In place (recv inside send) is safe: the sum is built aside.
std::string CompleteReduceScatter(const Op& op) {
  Comm& c = *op.comm;
  const size_t block = op.bytes / static_cast<size_t>(c.nranks()), at = block * static_cast<size_t>(c.rank());
  std::vector<std::vector<char>> parts(c.nranks());
  for (int p = 0; p < c.nranks(); ++p) {
    if (p == c.rank()) continue;
    Message m;
    if (std::string error = TakeColl(op, p, &m); !error.empty()) return error;
    parts[p] = std::move(m.data);
  }
  auto part = [&](int r) { return r == c.rank() ? static_cast<const char*>(op.send) + at : parts[r].data() + at; };
  std::vector<char> sum(part(0), part(0) + block);
  for (int r = 1; r < c.nranks(); ++r) {
    if (FminFmax(sum.data(), part(r), op)) continue;
    if (device::kernels::HostReduce(sum.data(), part(r), op.count, op.dtype, op.op) != 0)
      return Format("HostReduce rejected %s, op %d", DTypeName(op.dtype), op.op);
  }
  if (block > 0) std::memcpy(op.recv, sum.data(), block);
  return "";
}

std::string CompleteBroadcast(const Op& op) {
  Comm& c = *op.comm;
  for (int p = 0; p < c.nranks(); ++p) {
    if (p == c.rank()) continue;
    Message m;
    if (std::string error = TakeColl(op, p, &m); !error.empty()) return error;
    if (p == op.root && op.bytes > 0) std::memcpy(op.recv, m.data.data(), op.bytes);
  }
  if (c.rank() == op.root && op.recv != op.send && op.bytes > 0) std::memmove(op.recv, op.send, op.bytes);
  return "";
}

std::string CompleteAllGather(const Op& op) {
  Comm& c = *op.comm;
  char* out = static_cast<char*>(op.recv);
  // In place (send == recv + rank * bytes) is a no-op move.
  if (op.bytes > 0) std::memmove(out + c.rank() * op.bytes, op.send, op.bytes);
  for (int p = 0; p < c.nranks(); ++p) {
    if (p == c.rank()) continue;
    Message m;
    if (std::string error = TakeColl(op, p, &m); !error.empty()) return error;
    if (op.bytes > 0) std::memcpy(out + p * op.bytes, m.data.data(), op.bytes);
  }
  return "";
}

std::string CompleteRecv(const Op& op) {
  Comm& c = *op.comm;
  Message m;
  if (std::string error = c.Take(op.peer, Channel::kP2P, &m); !error.empty()) return error;
  if (m.frame.payload != op.bytes)
    return Format("rank %d received %llu bytes from rank %d, but expected %zu", c.rank(),
                  static_cast<unsigned long long>(m.frame.payload), op.peer, op.bytes);
  if (op.bytes > 0) std::memcpy(op.recv, m.data.data(), op.bytes);
  Frame ack;
  ack.kind = kAck;
  return c.Send(op.peer, ack, nullptr);  // completes the sender's nccl_send
}

// Second phase: what this rank receives.
std::string Complete(const Op& op) {
  switch (op.type) {
    case OpType::kAllReduce: return CompleteAllReduce(op);
    case OpType::kReduceScatter: return CompleteReduceScatter(op);
    case OpType::kBroadcast: return CompleteBroadcast(op);
    case OpType::kAllGather: return CompleteAllGather(op);
    case OpType::kRecv: return CompleteRecv(op);
    case OpType::kSend: return "";
  }
  return "";
}

// Counts operations of different communicators of one device that run at the same time:
// NCCL documents that this can deadlock (kernels of both wait for their peers while any
// CUDA call may synchronize the device), so it is a fault the tests look for.
class Running {
 public:
  explicit Running(Comm* comm) : comm_(comm) {
    CommRegistry& reg = Comms();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto& on_device = reg.running[comm->device()];
    for (auto& [other, n] : on_device)
      if (other != comm && n > 0) ++reg.overlaps;
    ++on_device[comm];
  }
  ~Running() {
    CommRegistry& reg = Comms();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto& on_device = reg.running[comm_->device()];
    if (--on_device[comm_] == 0) on_device.erase(comm_);
  }

 private:
  Comm* comm_;
};

// A group (or a single call): all sends, then all receives, then the sends' completion.
std::string RunGroup(std::vector<Op>& ops) {
  Running running(ops[0].comm.get());
  auto failed = [](const Op& op, const std::string& error) {
    op.comm->MarkFailed(Format("%s: %s", op.fn, error.c_str()));
    return Format("%s: %s", op.fn, error.c_str());
  };
  for (Op& op : ops)
    if (std::string error = Issue(op); !error.empty()) return failed(op, error);
  for (const Op& op : ops)
    if (std::string error = Complete(op); !error.empty()) return failed(op, error);
  for (const Op& op : ops)
    if (op.type == OpType::kSend)
      if (std::string error = op.comm->WaitAcks(op.peer, op.seq); !error.empty()) return failed(op, error);
  return "";
}

int Enqueue(const std::shared_ptr<Stream>& stream, std::vector<Op> ops) {
  auto guards = std::make_shared<std::vector<std::unique_ptr<InFlight>>>();
  for (const Op& op : ops) guards->push_back(std::make_unique<InFlight>(op.comm));
  const char* fn = ops.size() == 1 ? ops[0].fn : "nccl_group_end";
  auto shared_ops = std::make_shared<std::vector<Op>>(std::move(ops));
  return stream->Submit(fn, [shared_ops, guards]() { return RunGroup(*shared_ops); });
}

std::shared_ptr<Comm> ResolveComm(const char* fn, void* handle) {
  if (!g_loaded) {
    Fail("%s: NCCL is not loaded (call nccl_load first)", fn);
    return nullptr;
  }
  CommRegistry& reg = Comms();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.comms.find(handle);
  if (it == reg.comms.end()) {
    Fail("%s: %p is not a live emulated NCCL communicator", fn, handle);
    return nullptr;
  }
  return it->second;
}

bool NcclDType(int dtype) { return DTypeSize(dtype) != 0 && dtype != kInt16; }

// The checks NCCL (or CUDA under it) would make, at the call; then the op is queued, or
// kept for group_end.
int Post(Op op, void* comm_handle, void* stream_handle) {
  const char* fn = op.fn;
  op.comm = ResolveComm(fn, comm_handle);
  if (!op.comm) return 1;
  auto stream = ResolveStream(fn, stream_handle);
  if (!stream) return 1;
  Comm& c = *op.comm;
  if (stream->device() != c.device())
    return Fail("%s: the stream is on device %d, the communicator on device %d", fn, stream->device(), c.device());
  std::string status_why;
  if (c.Status(&status_why) == 1)
    return Fail("%s: the communicator is still initializing (poll nccl_comm_status until it is ready)", fn);
  if (std::string failure = c.Failure(); !failure.empty()) return Fail("%s: %s", fn, failure.c_str());
  const int device = c.device();
  switch (op.type) {
    case OpType::kAllReduce:
      if (!NcclDType(op.dtype)) return Fail("%s: NCCL has no dtype %s", fn, DTypeName(op.dtype));
      if (op.op != kSum && op.op != kMin && op.op != kMax) return Fail("%s: op %d is not sum, min or max", fn, op.op);
      if (!ElementBytes(op.count, op.dtype, &op.bytes)) return Fail("%s: count %zu overflows", fn, op.count);
      if (CheckDevice(fn, "send", op.send, op.bytes, device) != 0 || CheckDevice(fn, "recv", op.recv, op.bytes, device) != 0)
        return 1;
      break;
    case OpType::kReduceScatter: {
      if (!NcclDType(op.dtype)) return Fail("%s: NCCL has no dtype %s", fn, DTypeName(op.dtype));
      if (op.op != kSum && op.op != kMin && op.op != kMax) return Fail("%s: op %d is not sum, min or max", fn, op.op);
      size_t block = 0;
      if (!ElementBytes(op.count, op.dtype, &block) || block > std::numeric_limits<size_t>::max() / c.nranks())
        return Fail("%s: count %zu overflows", fn, op.count);
      op.bytes = block * static_cast<size_t>(c.nranks());
      if (CheckDevice(fn, "send", op.send, op.bytes, device) != 0 || CheckDevice(fn, "recv", op.recv, block, device) != 0)
        return 1;
      // NCCL: in place only as recv == send + rank * count; any other overlap is undefined.
      const auto s = reinterpret_cast<uintptr_t>(op.send), r = reinterpret_cast<uintptr_t>(op.recv);
      if (r != s + block * static_cast<size_t>(c.rank()) && r < s + op.bytes && s < r + block)
        return Fail("%s: recv overlaps send other than as this rank's block (in place)", fn);
      break;
    }
    case OpType::kBroadcast:
      if (op.root < 0 || op.root >= c.nranks()) return Fail("%s: root %d is not a rank of %d", fn, op.root, c.nranks());
      if (c.rank() == op.root && CheckDevice(fn, "send", op.send, op.bytes, device) != 0) return 1;
      if (CheckDevice(fn, "recv", op.recv, op.bytes, device) != 0) return 1;
      break;
    case OpType::kAllGather:
      if (op.bytes > std::numeric_limits<size_t>::max() / c.nranks()) return Fail("%s: %zu bytes overflow", fn, op.bytes);
      if (CheckDevice(fn, "send", op.send, op.bytes, device) != 0 ||
          CheckDevice(fn, "recv", op.recv, op.bytes * c.nranks(), device) != 0)
        return 1;
      break;
    case OpType::kSend:
    case OpType::kRecv:
      if (op.peer < 0 || op.peer >= c.nranks()) return Fail("%s: peer %d is not a rank of %d", fn, op.peer, c.nranks());
      if (CheckDevice(fn, "buf", op.type == OpType::kSend ? op.send : op.recv, op.bytes, device) != 0) return 1;
      break;
  }
  {
    CommRegistry& reg = Comms();
    std::lock_guard<std::mutex> lock(reg.mu);
    ++reg.calls[fn];
  }
  if (t_group_depth > 0) {
    uint64_t point;  // a failed stream fails the call now, as outside a group
    if (stream->Point(fn, &point) != 0) return 1;
    t_group_ops.emplace_back(std::move(stream), std::move(op));
    return 0;
  }
  std::vector<Op> ops;
  ops.push_back(std::move(op));
  return Enqueue(stream, std::move(ops));
}

}  // namespace

int NcclLoad() {
  if (GetSettings().no_nccl) return Fail("nccl_load: libnccl.so.2 not found (emulated)");
  g_loaded = true;
  return 0;
}

const char* NcclDescribe() {
  return g_loaded ? "emulated NCCL (host memory, Unix sockets between processes)" : "NCCL not loaded";
}

int NcclUniqueId(void* id) {
  if (!g_loaded) return Fail("nccl_unique_id: NCCL is not loaded (call nccl_load first)");
  if (id == nullptr) return Fail("nccl_unique_id: id is NULL");
  Comm::NewId(id);
  return 0;
}

int NcclCommInit(void** handle, int nranks, const void* id, int rank, int device) {
  const char* fn = "nccl_comm_init";
  if (!g_loaded) return Fail("%s: NCCL is not loaded (call nccl_load first)", fn);
  if (handle == nullptr || id == nullptr) return Fail("%s: comm or id is NULL", fn);
  if (nranks < 1) return Fail("%s: nranks = %d", fn, nranks);
  if (rank < 0 || rank >= nranks) return Fail("%s: rank %d is not in 0..%d", fn, rank, nranks - 1);
  if (!ValidDevice(device)) return Fail("%s: invalid device %d", fn, device);
  std::shared_ptr<Comm> comm;
  if (Comm::Create(nranks, id, rank, device, &comm) != 0) return 1;
  CommRegistry& reg = Comms();
  std::lock_guard<std::mutex> lock(reg.mu);
  *handle = comm.get();
  reg.comms.emplace(*handle, std::move(comm));
  return 0;
}

namespace {
int Close(const char* fn, void* handle, bool abort) {
  std::shared_ptr<Comm> comm;
  {
    CommRegistry& reg = Comms();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.comms.find(handle);
    if (it == reg.comms.end()) {
      if (reg.freed.count(handle) != 0) {
        // ncclCommAbort/Destroy free the communicator: a second call reads freed memory
        // (a crash or a hang inside NCCL on a GPU). Fail as hard as that would.
        std::fprintf(stderr, "emulated NCCL: %s(%p) on a communicator already destroyed or aborted "
                     "(use after free); aborting the process\n", fn, handle);
        std::abort();
      }
      return Fail("%s: %p is not a live emulated NCCL communicator", fn, handle);
    }
    comm = it->second;
    reg.freed.emplace(handle, std::move(it->second));
    reg.comms.erase(it);
  }
  comm->Close(abort);
  return 0;
}
}  // namespace

int NcclCommDestroy(void* comm) { return Close("nccl_comm_destroy", comm, false); }

int NcclCommStatus(void* handle, int* state) {
  if (state == nullptr) return Fail("nccl_comm_status: state is NULL");
  auto comm = ResolveComm("nccl_comm_status", handle);
  if (!comm) return 1;
  std::string why;
  *state = comm->Status(&why);
  if (*state == 2) Fail("nccl_comm_status: %s", why.c_str());
  return 0;
}

int NcclConcurrentOps() {
  CommRegistry& reg = Comms();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.overlaps;
}
int NcclCommAbort(void* comm) { return Close("nccl_comm_abort", comm, true); }

int NcclCalls(const char* fn) {
  CommRegistry& reg = Comms();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.calls.find(fn == nullptr ? "" : fn);
  return it == reg.calls.end() ? 0 : it->second;
}

namespace {
int PostReduction(const char* fn, OpType type, const void* send, void* recv, size_t count, int dtype, int op,
                  void* comm, void* stream) {
  Op o;
  o.fn = fn;
  o.type = type;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.dtype = dtype;
  o.op = op;
  return Post(std::move(o), comm, stream);
}
}  // namespace

int NcclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream) {
  return PostReduction("nccl_all_reduce", OpType::kAllReduce, send, recv, count, dtype, op, comm, stream);
}

int NcclReduceScatter(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream) {
  return PostReduction("nccl_reduce_scatter", OpType::kReduceScatter, send, recv, count, dtype, op, comm, stream);
}

int NcclBroadcast(const void* send, void* recv, size_t bytes, int root, void* comm, void* stream) {
  Op o;
  o.fn = "nccl_broadcast";
  o.type = OpType::kBroadcast;
  o.send = send;
  o.recv = recv;
  o.count = o.bytes = bytes;
  o.root = root;
  return Post(std::move(o), comm, stream);
}

int NcclAllGather(const void* send, void* recv, size_t bytes, void* comm, void* stream) {
  Op o;
  o.fn = "nccl_all_gather";
  o.type = OpType::kAllGather;
  o.send = send;
  o.recv = recv;
  o.count = o.bytes = bytes;
  return Post(std::move(o), comm, stream);
}

int NcclSend(const void* buf, size_t bytes, int peer, void* comm, void* stream) {
  Op o;
  o.fn = "nccl_send";
  o.type = OpType::kSend;
  o.send = buf;
  o.count = o.bytes = bytes;
  o.peer = peer;
  return Post(std::move(o), comm, stream);
}

int NcclRecv(void* buf, size_t bytes, int peer, void* comm, void* stream) {
  Op o;
  o.fn = "nccl_recv";
  o.type = OpType::kRecv;
  o.recv = buf;
  o.count = o.bytes = bytes;
  o.peer = peer;
  return Post(std::move(o), comm, stream);
}

int NcclGroupStart() {
  if (!g_loaded) return Fail("nccl_group_start: NCCL is not loaded (call nccl_load first)");
  ++t_group_depth;
  return 0;
}

int NcclGroupEnd() {
  if (t_group_depth == 0) return Fail("nccl_group_end: no nccl_group_start on this thread");
  if (--t_group_depth > 0) return 0;  // nested: the outermost end issues
  auto pending = std::move(t_group_ops);
  t_group_ops.clear();
  // One task per stream, holding that stream's operations in call order.
  std::vector<std::pair<std::shared_ptr<Stream>, std::vector<Op>>> by_stream;
  for (auto& [stream, op] : pending) {
    auto it = by_stream.begin();
    while (it != by_stream.end() && it->first != stream) ++it;
    if (it == by_stream.end()) it = by_stream.insert(by_stream.end(), {stream, {}});
    it->second.push_back(std::move(op));
  }
  int rc = 0;
  std::string first_error;
  for (auto& [stream, ops] : by_stream) {
    if (Enqueue(stream, std::move(ops)) != 0 && rc == 0) {
      rc = 1;
      first_error = LastError();
    }
  }
  return rc == 0 ? 0 : Fail(first_error);
}

}  // namespace starling::emu
