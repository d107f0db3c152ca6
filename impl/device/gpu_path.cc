#include "impl/device/gpu_path.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "impl/common/error.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/group.h"
#include "impl/runtime/wait_monitor.h"
#include "impl/ops/sequence.h"

namespace starling::device {
namespace {

// What each rank reports.
struct Report {
  uint64_t gpu;     // hash of host name and the GPU's identity (its UUID)
  uint64_t nccl;    // hash of the NCCL version loaded (ranks must agree)
  uint8_t nccl_ok;  // NCCL loaded here (and STARLING_GPU_PATH allows it)
  uint8_t pad[7];
};

uint64_t Hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

class SetupOp : public runtime::Op {
 public:
  std::string Describe() const override { return "GPU path setup (the first collective on CUDA tensors)"; }

  void Run(runtime::Context& context) override {
    GpuState& gpu = context.Extension<GpuState>();
    if (gpu.path() != GpuPath::kUnset) return;
    const Plugin& p = gpu.plugin();
    const std::string wanted = context.config().gpu_path;
    gpu.set_scratch_cap(context.config().gpu_scratch_bytes);

    Report mine{};
    std::string local_problem;
    if (wanted == "staged") {
      local_problem = "STARLING_GPU_PATH=staged";
    } else if (p->nccl_load() != 0) {
      local_problem = p->last_error();
    }
    mine.nccl_ok = local_problem.empty() ? 1 : 0;
    if (mine.nccl_ok) mine.nccl = Hash(p->nccl_describe());
    char identity[256] = {};
    p.Check(p->device_identity(gpu.device(), identity, sizeof identity - 1), "device_identity");
    mine.gpu = Hash(HostName() + "|" + identity);

    ops::Signature sig;
    sig.kind = ops::OpKind::kGpuSetup;
    sig.seq = ops::NextSequence(context, sig.kind);
    sig.count = sizeof(Report);
    ops::Exchange ex(context, transport::Channel::kCollective, Label());
    const std::vector<const char*> all = ops::DisseminationGather(context, ops::WorldGroup(context), sig, &mine,
                                                                  sizeof mine, ex);
    std::string reason = Decide(context, all, local_problem);
    if (reason.empty()) {
      void* comm = InitNccl(context, gpu, &reason);
      if (comm != nullptr) {
        gpu.SetPath(GpuPath::kNccl, "every rank has a GPU of its own and NCCL", comm);
        return;
      }
    }
    gpu.SetPath(GpuPath::kStaged, reason, nullptr);
  }

 private:
  // Empty when NCCL can be used, else why not (the same text on every rank, except
  // for this rank's own NCCL problem, which only it can name).
  static std::string Decide(runtime::Context& context, const std::vector<const char*>& all,
                            const std::string& local_problem) {
    std::map<uint64_t, int> owner;
    Report first;
    std::memcpy(&first, all[0], sizeof first);
    for (int r = 0; r < context.size(); ++r) {
      Report report;
      std::memcpy(&report, all[static_cast<size_t>(r)], sizeof report);
      if (!report.nccl_ok) {
        if (r == context.rank()) return "NCCL cannot be used on this rank: " + local_problem;
        return Str("NCCL cannot be used on rank ", r, " (starling_gpu_path there says why)");
      }
      if (first.nccl_ok && report.nccl != first.nccl)
        return Str("ranks 0 and ", r, " load different NCCL versions (starling_gpu_path on each names it)");
      const auto [it, fresh] = owner.emplace(report.gpu, r);
      if (!fresh)
        return Str("ranks ", it->second, " and ", r, " share one GPU (NCCL needs a GPU of its own per rank)");
    }
    return "";
  }

  // Rank 0's NCCL id reaches every rank through the context's MPI, with a byte saying
  // whether rank 0 got one (else nobody starts an init that could never complete). Then
  // the collective communicator init, non-blocking, polled under the wait monitor so that
  // STARLING_TIMEOUT_SECONDS, starling_context_abort and a dead peer end it; then an
  // agreement that it worked everywhere. NULL (and *why) if it failed anywhere.
  void* InitNccl(runtime::Context& context, GpuState& gpu, std::string* why) {
    const Plugin& p = gpu.plugin();
    std::vector<uint8_t> id(STARLING_NCCL_ID_BYTES + 1, 0);  // the id, then rank 0's ok byte
    std::string failure;
    if (context.rank() == 0) {
      if (p->nccl_unique_id(id.data()) != 0) {
        failure = p->last_error();
      } else {
        id.back() = 1;
      }
    }
    TensorView view;
    view.data = id.data();
    view.dtype = DType::kUInt8;
    view.shape = {static_cast<int64_t>(id.size())};
    view.numel = id.size();
    view.bytes = id.size();
    ops::Signature sig;
    sig.kind = ops::OpKind::kGpuSetup;
    sig.seq = ops::NextSequence(context, sig.kind);
    ops::RunBroadcast(context, ops::WorldGroup(context), view, view, 0, sig, Label());
    if (id.back() == 0 && failure.empty()) failure = "rank 0 could not create the NCCL id (ncclGetUniqueId)";
    void* comm = nullptr;
    if (failure.empty()) failure = StartAndWait(context, gpu, id.data(), &comm);
    // Everyone learns whether every rank got a communicator.
    const uint8_t ok = failure.empty() ? 1 : 0;
    ops::Signature check;
    check.kind = ops::OpKind::kGpuSetup;
    check.seq = ops::NextSequence(context, check.kind);
    check.count = 1;
    ops::Exchange ex(context, transport::Channel::kCollective, Label());
    const std::vector<const char*> all = ops::DisseminationGather(context, ops::WorldGroup(context), check, &ok, 1, ex);
    for (int r = 0; r < context.size(); ++r) {
      if (*all[static_cast<size_t>(r)] != 0) continue;
      if (comm) p->nccl_comm_abort(comm);
      *why = Str("creating the NCCL communicator failed on rank ", r,
                 r == context.rank() ? Str(": ", failure) : std::string());
      return nullptr;
    }
    return comm;
  }

  // ncclCommInitRankConfig (blocking = 0) and its polling; "" or why it failed. A
  // timeout, an abort or a dead peer aborts the communicator and throws (every rank
  // waiting in the init fails the same way: the init cannot complete without them).
  std::string StartAndWait(runtime::Context& context, GpuState& gpu, const void* id, void** out) {
    const Plugin& p = gpu.plugin();
    void* comm = nullptr;
    if (p->nccl_comm_init(&comm, context.size(), id, context.rank(), gpu.device()) != 0) return p->last_error();
    runtime::WaitMonitor monitor(context, label_);
    auto everyone = [&context] {
      runtime::Awaited a;
      for (int r = 0; r < context.size(); ++r)
        if (r != context.rank()) a.ranks.insert(r);
      a.text = "the other ranks (creating the NCCL communicator)";
      return a;
    };
    for (int polls = 0;; ++polls) {
      int state = 0;
      std::string failure;
      if (p->nccl_comm_status(comm, &state) != 0 || state == 2) failure = p->last_error();
      if (!failure.empty()) {
        p->nccl_comm_abort(comm);
        return failure;
      }
      if (state == 0) break;
      try {
        monitor.CheckAborted();
        if (polls % 16 == 15) monitor.Check(everyone);
      } catch (...) {
        p->nccl_comm_abort(comm);
        throw;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 20 : 500));
    }
    *out = comm;
    return "";
  }

  LazyText label_ = [] { return std::string("GPU path setup (creating the NCCL communicator)"); };
};

}  // namespace

void RequireWanted(runtime::Context& context, GpuState& gpu) {
  if (context.config().gpu_path == "nccl" && gpu.path() == GpuPath::kStaged)
    Fail(Code::kUnsupported, "STARLING_GPU_PATH=nccl but the NCCL path cannot be used: ", gpu.PathDescription());
}

GpuPath EnsurePath(runtime::Context& context, GpuState& gpu) {
  if (gpu.path() == GpuPath::kUnset) {
    std::lock_guard<std::mutex> lock(gpu.setup_mutex);  // one setup per context
    if (gpu.path() == GpuPath::kUnset) {
      std::shared_ptr<runtime::Request> request = context.engine().Execute(std::make_unique<SetupOp>());
      if (request->code() != Code::kOk) throw Error(request->code(), request->message());
    }
  }
  RequireWanted(context, gpu);
  return gpu.path();
}

}  // namespace starling::device
