#include "impl/windows/ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <set>
#include <thread>

#include "impl/common/logging.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/reduce.h"
#include "impl/runtime/wait_monitor.h"
#include "impl/transport/shm/links.h"
#include "impl/transport/shm/probe.h"
#include "impl/windows/registry.h"
#include "impl/ops/sequence.h"

namespace starling::windows {
namespace {

using transport::Channel;

constexpr size_t kStageBelowBytes = size_t{1} << 20;  // see TransferOp::Write
constexpr double kNoticeGraceSeconds = 0.01;  // see FailGone (as runtime/wait_monitor.cc)

int32_t NameHash(const std::string& name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return static_cast<int32_t>(h & 0x7fffffff);
}

// Turns the first failed reply into an error naming the peer.
void CheckReplies(const std::vector<WindowReply>& replies, const std::vector<int>& peers) {
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].magic != kWindowMagic) Fail(Code::kTransport, "malformed window reply from rank ", peers[i]);
    if (replies[i].code != 0) {
      std::string message(replies[i].message, strnlen(replies[i].message, sizeof replies[i].message));
      throw Error(static_cast<Code>(replies[i].code), message);
    }
  }
}

// Replies still in flight when the service stops have already been received (their
// requesters finished before agreeing to free), so this is only a bound for failures.
constexpr double kServiceStopGraceSeconds = 2.0;

// The context is being destroyed with windows alive: peers may still need this rank
// to serve their last requests, so agree with every rank first (serving meanwhile),
// unless the context already failed.
void StopService(runtime::Context& context, Registry& registry) {
  context.SetBackgroundService(nullptr, nullptr);  // waits for a running service call
  // After an abort or a peer failure nobody may be left to take the replies in flight.
  registry.service.Stop(context, context.local_teardown() ? 0.0 : kServiceStopGraceSeconds);
}

// The context is being destroyed with windows alive: its destroy served peers' last
// requests until every rank had left (Context::AwaitDepartures), unless it failed.
void QuiesceAndStop(runtime::Context& context, Registry& registry) {
  StopService(context, registry);
  registry.UnlinkSegments();
}

void StartService(runtime::Context& context, Registry& registry) {
  runtime::Context* ctx = &context;
  context.SetBackgroundService([ctx, &registry] { return registry.service.Poll(*ctx, registry); },
                               [ctx, &registry] { QuiesceAndStop(*ctx, registry); });
}

// The checks of a wait for a lock or mutex slot of a window (see HolderChecks).
HolderChecks MakeHolderChecks(runtime::Context& context, const std::string& window) {
  runtime::Context* ctx = &context;
  return [ctx, window](const char* what, bool serve) -> HolderCheck {
    struct Wait {
      Wait(runtime::Context& context, std::string label)
          : what([label = std::move(label)] { return label; }), monitor(context, what) {}
      LazyText what;  // before monitor, which refers to it
      runtime::WaitMonitor monitor;
    };
    auto wait = std::make_shared<Wait>(*ctx, Str(what, " (window '", window, "')"));
    return [wait, ctx, serve](int holder) {
      wait->monitor.CheckAborted();
      if (serve) ctx->ServiceBackground();
      wait->monitor.Check([holder] {
        runtime::Awaited awaited;
        if (holder >= 0) {
          awaited.ranks.insert(holder);
          awaited.text = Str("rank ", holder, " (holds the mutex or the lock of a window buffer)");
        } else {
          awaited.text = "another thread of this rank (holds the mutex)";
        }
        return awaited;
      });
    };
  };
}

PeerBytesCounter MakeSharedCounter(runtime::Context& context, bool received) {
  runtime::Context* ctx = &context;
  return [ctx, received](int peer, uint64_t bytes) {
    transport::Traffic* traffic = ctx->transport().traffic();
    if (!traffic) return;
    if (received) {
      traffic->ReceivedShared(peer, bytes);
    } else {
      traffic->SentShared(peer, bytes);
    }
  };
}

// Same-host ranks of `candidates` whose memory this rank shares (none for device
// windows: their puts stage through host memory on the message path).
std::vector<int> SharedPeers(runtime::Context& context, const TensorView& tensor, const std::vector<int>& candidates) {
  std::vector<int> peers;
  const std::shared_ptr<transport::shm::NeighborLinks>& links = context.shm_links();
  if (!links || tensor.on_device()) return peers;
  for (int r : candidates)
    if (links->linked(r)) peers.push_back(r);
  return peers;
}

std::string SlotsPurpose(uint32_t id) { return Str("win", id); }

// Ranks `gone` (same-host targets or sources) have exited: the others are told, the
// context is broken, and the operation fails with PEER_FAILED naming them.
[[noreturn]] void FailGone(runtime::Context& context, const std::vector<int>& gone) {
  // What the ranks say comes first, as in any wait: another rank found the first
  // failure (and the gone rank may have stopped at it and left), or the gone rank said
  // why it left (an uncaught exception). As a wait does before probing, this listens
  // for kNoticeGraceSeconds: a notice sent just before its sender exited is in flight.
  std::string told;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kNoticeGraceSeconds);
  for (;;) {
    context.CheckUsable();  // another thread of this rank heard of a failure first
    told = context.PollFailureNotice();
    if (told.empty() && context.any_departure())
      told = context.DepartureFailure(std::set<int>(gone.begin(), gone.end()), 0);
    if (!told.empty() || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (!told.empty()) {
    context.MarkBroken(told, Code::kPeerFailed, /*revoke=*/false);
    throw Error(Code::kPeerFailed, told);
  }
  const std::string message =
      Str(context.DescribeGone(gone), " gone (killed, crashed or exited without destroying its context)");
  // The survivors hear of it through the notice, not a revocation: revoking now, right
  // at the death, makes Open MPI 5's TCP transport close the dead rank's endpoint while
  // this process's progress thread serves windows inside MPI too, and those two
  // deadlock inside Open MPI (seen 1 run in 10 of fault.pushsum.np3). The repair
  // revokes with the window service stopped.
  context.NotifyPeerFailure(message, gone);
  context.MarkBroken(message, Code::kPeerFailed, /*revoke=*/false);
  throw Error(Code::kPeerFailed, message);
}

// A write into a same-host target's memory succeeds whether the target lives or not:
// after writing, each such target's process is looked at (a poll on a pidfd), so a dead
// target is PEER_FAILED at once, as it is through messages.
void FailIfTargetsExited(runtime::Context& context, const Window& window, const std::vector<int>& ranks) {
  std::vector<int> gone;
  for (int r : ranks)
    if (window.TargetExited(r)) gone.push_back(r);
  if (!gone.empty()) FailGone(context, gone);
}

class CreateOp : public runtime::Op {
 public:
  CreateOp(const TensorView& tensor, std::string name, bool zero_init, std::unique_ptr<device::HostAccess> device,
           device::PooledBuffer initial)
      : tensor_(tensor),
        name_(std::move(name)),
        zero_init_(zero_init),
        device_(std::move(device)),
        initial_(std::move(initial)) {}
  std::string Describe() const override { return Str("window_create '", name_, "' (", tensor_.Describe(), ")"); }

  // Happens-before rule: this rank registers the window (and serves requests for it)
  // before it sends anything in the agreement, and no rank leaves the agreement before
  // hearing, directly or through others, from every rank. So once window_create
  // returns anywhere, every rank can serve the window: a put issued at once never
  // finds a peer without it.
  void Run(runtime::Context& context) override {
    Registry& registry = context.Extension<Registry>();
    const uint32_t id = registry.NextId();
    const bool exists = registry.Find(name_) != nullptr;
    std::shared_ptr<Window> window;
    SharedSlotsPlan share;
    if (!exists) {
      std::shared_ptr<const runtime::TopologyState> topology = context.topology();
      const int rank = context.rank();
      const void* initial = zero_init_ ? nullptr : device_ ? initial_.data() : tensor_.data;
      // The slots of same-host in-neighbors go into a segment they map after the
      // agreement below (so it exists by then); same-host out-neighbors map it to get.
      share.origins = SharedPeers(context, tensor_, topology->graph->in_neighbors(rank));
      share.readers = SharedPeers(context, tensor_, topology->graph->out_neighbors(rank));
      if (!share.origins.empty() || !share.readers.empty())
        share.name = context.shm_links()->SegmentNameOf(rank, SlotsPurpose(id));
      window = std::make_shared<Window>(id, name_, tensor_, rank, context.size(), topology->graph->in_neighbors(rank),
                                        topology->graph->out_neighbors(rank), topology, initial, std::move(device_),
                                        share, MakeHolderChecks(context, name_), MakeSharedCounter(context, true),
                                        MakeSharedCounter(context, false));
      if (!window->shared_slots_error().empty())
        STARLING_LOG_DEBUG("window '", name_, "': its buffers for ranks ", transport::shm::FormatRanks(share.origins),
                           " stay private (", window->shared_slots_error(), "); those ranks write through messages");
      if (registry.Add(window)) StartService(context, registry);
    }
    ops::Signature sig;
    sig.kind = ops::OpKind::kWindowCreate;
    sig.seq = ops::NextSequence(context, sig.kind);
    sig.dtype = static_cast<uint8_t>(tensor_.dtype);
    sig.count = static_cast<int64_t>(tensor_.numel);
    sig.root = NameHash(name_);
    // Bit 1: device memory, which every rank's window must agree on.
    sig.extra = static_cast<uint8_t>((exists ? 1 : 0) | (tensor_.on_device() ? 2 : 0));
    try {
      ops::Agree(context, ops::WorldGroup(context), sig, Label());
    } catch (...) {
      // Every rank fails the agreement together: nobody can have used the window.
      if (window && registry.Remove(id)) StopService(context, registry);
      throw;
    }
    STARLING_CHECK(!exists, Code::kAlreadyExists, "a window named '", name_, "' already exists");
    context.live_windows().fetch_add(1);
    AttachTargets(context, *window, share);
  }

  // Maps the segments of same-host neighbors: out-neighbors keep a slot for this rank
  // there (puts: this rank's readers in `share`, whose segment serves them likewise),
  // in-neighbors the address of their tensor (gets: this rank's origins). A neighbor
  // whose segment cannot be mapped (it could not make one), or whose memory this
  // process may not read, is reached through messages.
  static void AttachTargets(runtime::Context& context, Window& window, const SharedSlotsPlan& share) {
    const std::vector<int>& puts = share.readers;
    const std::vector<int>& gets = share.origins;
    std::vector<int> peers;
    std::set_union(puts.begin(), puts.end(), gets.begin(), gets.end(), std::back_inserter(peers));
    std::vector<Window::Target> targets;
    const auto& processes = context.layout().processes;
    for (int r : peers) {
      if (static_cast<size_t>(r) >= processes.size()) continue;  // no identity: stay on messages
      Window::Target target{r, context.shm_links()->SegmentNameOf(r, SlotsPurpose(window.id())),
                            processes[static_cast<size_t>(r)]};
      target.put = std::binary_search(puts.begin(), puts.end(), r);
      target.get = std::binary_search(gets.begin(), gets.end(), r);
      targets.push_back(std::move(target));
    }
    if (targets.empty()) return;
    const std::string failures = window.AttachTargets(targets);
    if (!failures.empty()) STARLING_LOG_DEBUG("window '", window.name(), "': through messages: ", failures);
  }

 private:
  TensorView tensor_;
  std::string name_;
  bool zero_init_;
  std::unique_ptr<device::HostAccess> device_;
  device::PooledBuffer initial_;  // a device tensor's contents, read when create was called
};

class FreeOp : public runtime::Op {
 public:
  explicit FreeOp(std::shared_ptr<Window> window) : window_(std::move(window)) {}
  std::string Describe() const override { return Str("window_free '", window_->name(), "'"); }

  // Every rank's earlier operations on the window were acknowledged before it got
  // here, and the agreement keeps serving requests while it waits; after it, requests
  // for the window get NOT_FOUND.
  void Run(runtime::Context& context) override {
    ops::Signature sig;
    sig.kind = ops::OpKind::kWindowFree;
    sig.seq = ops::NextSequence(context, sig.kind);
    sig.count = window_->id();
    sig.root = NameHash(window_->name());
    ops::Agree(context, ops::WorldGroup(context), sig, Label());
    // Every origin's writes are done: count them (traffic figures) before the slots go.
    window_->CountReceived();
    Registry& registry = context.Extension<Registry>();
    const bool last = registry.Remove(window_->id());
    context.live_windows().fetch_sub(1);
    if (last) StopService(context, registry);
  }

 private:
  std::shared_ptr<Window> window_;
};

class TransferOp : public runtime::Op {
 public:
  TransferOp(std::shared_ptr<Window> window, Transfer kind, const TensorView* tensor, std::vector<int> ranks,
             std::vector<double> weights, double self_weight, bool require_mutex)
      : window_(std::move(window)),
        kind_(kind),
        ranks_(std::move(ranks)),
        weights_(std::move(weights)),
        self_weight_(self_weight),
        require_mutex_(require_mutex) {
    if (tensor) tensor_ = *tensor;
  }

  std::string Describe() const override {
    static const char* kNames[] = {"window_put", "window_accumulate", "window_get"};
    return Str(kNames[static_cast<int>(kind_)], " '", window_->name(), "'");
  }

  void Run(runtime::Context& context) override {
    Registry& registry = context.Extension<Registry>();
    STARLING_CHECK(registry.Find(window_->id()) == window_, Code::kInvalidUsage, "window '", window_->name(),
                   "' was freed");
    if (kind_ == Transfer::kGet) {
      Get(context);
    } else {
      Write(context, registry.associated_p.load());
    }
  }

 private:
  void Write(runtime::Context& context, bool with_p) {
    const double p = with_p ? window_->p() : 0.0;
    // Same-host targets that share this window's memory take the data straight into
    // their slot for this rank (under the slot's mutex, in shared memory too, with
    // require_mutex); the rest go through messages, posted first.
    std::vector<size_t> by_message, by_memory;
    for (size_t i = 0; i < ranks_.size(); ++i)
      (window_->PutsShared(ranks_[i]) ? by_memory : by_message).push_back(i);
    ops::Exchange requests(context, Channel::kWindowRequest, Label());
    ops::Exchange data(context, Channel::kWindowData, Label());
    ops::Exchange replies(context, Channel::kWindowReply, Label());
    std::vector<WindowRequest> sent(by_message.size());
    std::vector<WindowReply> got(by_message.size());
    // A put below 1 MiB sends a copy of the tensor, from two buffers used in turn: the
    // update that usually follows rewrites the tensor right after the peers read it, so
    // its cache lines would go back and forth between the cores every step. Measured,
    // 2 ranks, put + update: 64 KiB 26 -> 17 us, 16 KiB 9.6 -> 8.3 us; from 1 MiB the
    // copy costs more than it saves, and so it does for accumulate (64 KiB 8 -> 16 us),
    // whose tensor usually stays as it is.
    const void* payload = tensor_.data;
    const bool staged = !by_message.empty() && kind_ == Transfer::kPut && tensor_.bytes > 0 &&
                        tensor_.bytes < kStageBelowBytes && !tensor_.on_device();
    if (staged) payload = window_->StageForSend(tensor_.data, tensor_.bytes);
    try {
      Post(context, requests, data, replies, by_message, sent, got, payload, with_p, p);
      transport::Traffic* traffic = context.transport().traffic();
      for (size_t i : by_memory) {
        if (kind_ == Transfer::kPut) {
          window_->PutShared(ranks_[i], tensor_.data, weights_[i], with_p, p * weights_[i], require_mutex_);
        } else {
          window_->AccumulateShared(ranks_[i], tensor_.data, weights_[i], with_p, p * weights_[i], require_mutex_);
        }
        if (traffic) traffic->SentShared(ranks_[i], tensor_.bytes);
      }
      if (!by_memory.empty()) {
        std::vector<int> shared;
        for (size_t i : by_memory) shared.push_back(ranks_[i]);
        FailIfTargetsExited(context, *window_, shared);
      }
      requests.Wait();
      data.Wait();
      replies.Wait();
    } catch (...) {
      if (staged) window_->AbandonSendStage();
      throw;
    }
    std::vector<int> message_ranks;
    for (size_t i : by_message) message_ranks.push_back(ranks_[i]);
    CheckReplies(got, message_ranks);
    if (self_weight_ != 1.0) {
      if (tensor_.numel > 0) ops::Scale(tensor_.data, tensor_.data, self_weight_, tensor_.numel, tensor_.dtype);
      if (with_p) window_->ScaleP(self_weight_);
    }
  }

  // Posts the requests, payloads and reply receives of a put or accumulate to
  // ranks_[i] for each i of `which`.
  void Post(runtime::Context& context, ops::Exchange& requests, ops::Exchange& data, ops::Exchange& replies,
            const std::vector<size_t>& which, std::vector<WindowRequest>& sent, std::vector<WindowReply>& got,
            const void* payload, bool with_p, double p) {
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t i = which[k];
      WindowRequest& r = sent[k];
      r.op = kind_ == Transfer::kPut ? WindowOp::kPut : WindowOp::kAccumulate;
      r.window_id = window_->id();
      r.sender = context.rank();
      r.bytes = tensor_.bytes;
      r.chunk = static_cast<uint32_t>(ops::WholeMessageChunk(tensor_.bytes));
      r.flags = (require_mutex_ ? kRequestRequireMutex : 0) | (with_p ? kRequestHasP : 0);
      r.weight = weights_[i];
      r.p = p * weights_[i];
      requests.SendRaw(ranks_[i], &r, sizeof r);
      if (tensor_.bytes > 0) data.SendRaw(ranks_[i], payload, tensor_.bytes, r.chunk);
      replies.RecvRaw(ranks_[i], &got[k], sizeof got[k]);
    }
  }

  // Same-host sources whose memory this process may read are read directly
  // (Window::GetShared); the others are asked through messages, first, so that their
  // services work meanwhile.
  void Get(runtime::Context& context) {
    std::vector<int> by_message, by_memory;
    std::vector<double> message_weights;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (window_->GetsShared(ranks_[i])) {
        by_memory.push_back(static_cast<int>(i));
      } else {
        by_message.push_back(ranks_[i]);
        message_weights.push_back(weights_[i]);
      }
    }
    ops::Exchange requests(context, Channel::kWindowRequest, Label());
    ops::Exchange replies(context, Channel::kWindowReply, Label());
    std::vector<WindowRequest> sent(by_message.size());
    std::vector<WindowReply> got(by_message.size());
    for (size_t i = 0; i < by_message.size(); ++i) {
      sent[i].op = WindowOp::kGet;
      sent[i].window_id = window_->id();
      sent[i].sender = context.rank();
      requests.SendRaw(by_message[i], &sent[i], sizeof sent[i]);
      replies.RecvRaw(by_message[i], &got[i], sizeof got[i]);
    }
    transport::Traffic* traffic = context.transport().traffic();
    for (int i : by_memory) {
      const int source = ranks_[static_cast<size_t>(i)];
      size_t bytes = 0;
      try {
        bytes = window_->GetShared(source, weights_[static_cast<size_t>(i)]);
      } catch (const Error& e) {
        // The kernel finds an exiting process's memory gone before its pidfd tells. (A
        // wait for a lock whose holder died has already failed the context, naming it.)
        if (e.code() == Code::kPeerFailed && !context.local_teardown()) FailGone(context, {source});
        FailIfTargetsExited(context, *window_, {source});
        throw;
      }
      if (traffic) traffic->ReceivedShared(source, bytes);
    }
    requests.Wait();
    replies.Wait();
    replies.Clear();
    // Receive what the sources sent (even if another one refused) before judging.
    std::vector<runtime::ScratchPool::Buffer> buffers(by_message.size());
    for (size_t i = 0; i < by_message.size(); ++i) {
      if (got[i].magic != kWindowMagic || got[i].code != 0 || got[i].bytes == 0) continue;
      STARLING_CHECK(got[i].bytes == window_->tensor().bytes, Code::kMismatch, "rank ", by_message[i], " sent ",
                     got[i].bytes, " bytes for window '", window_->name(), "' which holds ", window_->tensor().bytes);
      buffers[i] = context.scratch().Get(got[i].bytes);
      replies.RecvRaw(by_message[i], buffers[i].data(), got[i].bytes, nullptr, got[i].chunk);
    }
    replies.Wait();
    CheckReplies(got, by_message);
    for (size_t i = 0; i < by_message.size(); ++i)
      window_->CommitCopy(window_->SlotOf(by_message[i]), buffers[i].data(), message_weights[i]);
  }

  std::shared_ptr<Window> window_;
  Transfer kind_;
  TensorView tensor_;
  std::vector<int> ranks_;
  std::vector<double> weights_;
  double self_weight_;
  bool require_mutex_;
};

class RemoteMutexOp : public runtime::Op {
 public:
  RemoteMutexOp(std::shared_ptr<Window> window, std::vector<int> ranks, bool acquire)
      : window_(std::move(window)), ranks_(std::move(ranks)), acquire_(acquire) {}
  std::string Describe() const override {
    return Str(acquire_ ? "window_mutex_acquire '" : "window_mutex_release '", window_->name(), "'");
  }

  void Run(runtime::Context& context) override {
    // One rank at a time, in ascending order, so two ranks locking overlapping sets
    // cannot deadlock.
    for (int rank : ranks_) {
      if (window_->PutsShared(rank)) {  // the mutex is a word in the target's segment
        window_->MutexShared(rank, acquire_);
        FailIfTargetsExited(context, *window_, {rank});
        continue;
      }
      ops::Exchange requests(context, Channel::kWindowRequest, Label());
      ops::Exchange replies(context, Channel::kWindowReply, Label());
      WindowRequest request;
      request.op = acquire_ ? WindowOp::kMutexAcquire : WindowOp::kMutexRelease;
      request.window_id = window_->id();
      request.sender = context.rank();
      std::vector<WindowReply> reply(1);
      requests.SendRaw(rank, &request, sizeof request);
      replies.RecvRaw(rank, &reply[0], sizeof reply[0]);
      requests.Wait();
      replies.Wait();
      CheckReplies(reply, {rank});
    }
  }

 private:
  std::shared_ptr<Window> window_;
  std::vector<int> ranks_;
  bool acquire_;
};

void CheckWeights(const std::vector<double>& weights) {
  for (double w : weights)
    STARLING_CHECK_ARG(std::isfinite(w) && w >= 0, "window weight ", w, " must be finite and >= 0");
}

// ranks must be unique members of `allowed`.
void CheckSubset(const std::vector<int>& ranks, const std::vector<int>& allowed, const char* role,
                 const Window& window, int me) {
  std::set<int> seen;
  for (int r : ranks) {
    STARLING_CHECK_ARG(std::find(allowed.begin(), allowed.end(), r) != allowed.end(), "rank ", r, " is not an ",
                       role, " of rank ", me, " (window '", window.name(), "')");
    STARLING_CHECK_ARG(seen.insert(r).second, "rank ", r, " is listed twice");
  }
}

}  // namespace

std::unique_ptr<runtime::Op> MakeCreate(runtime::Context& context, const TensorView& tensor, std::string name,
                                        bool zero_init) {
  STARLING_CHECK_ARG(!name.empty(), "window name must not be empty");
  STARLING_CHECK_ARG(name.find('\n') == std::string::npos, "window name must not contain a newline");
  std::unique_ptr<device::HostAccess> access;
  device::PooledBuffer initial;
  if (tensor.on_device()) {
    std::shared_ptr<device::GpuState> gpu = context.SharedExtension<device::GpuState>();
    gpu->Admit(tensor, "tensor");
    access = std::make_unique<device::HostAccess>(gpu, tensor);
    if (!zero_init && tensor.bytes > 0) {
      initial = gpu->TakePinned(tensor.bytes);
      access->ToHost(initial.data(), true);
    }
  }
  return std::make_unique<CreateOp>(tensor, std::move(name), zero_init, std::move(access), std::move(initial));
}

std::unique_ptr<runtime::Op> MakeFree(runtime::Context&, std::shared_ptr<Window> window) {
  return std::make_unique<FreeOp>(std::move(window));
}

std::unique_ptr<runtime::Op> MakeTransfer(runtime::Context& context, std::shared_ptr<Window> window, Transfer kind,
                                          const TensorView* tensor, const TransferArgs& args) {
  const bool get = kind == Transfer::kGet;
  if (!get) {
    STARLING_CHECK_ARG(tensor != nullptr, "tensor must not be NULL");
    STARLING_CHECK_ARG(tensor->dtype == window->tensor().dtype && tensor->shape == window->tensor().shape,
                       "tensor is ", tensor->Describe(), " but window '", window->name(), "' holds ",
                       window->tensor().Describe());
  }
  const std::vector<int>& allowed = get ? window->in_neighbors() : window->out_neighbors();
  std::vector<int> ranks = args.ranks.empty() ? allowed : args.ranks;
  CheckSubset(ranks, allowed, get ? "in-neighbor" : "out-neighbor", *window, context.rank());
  std::vector<double> weights = args.weights;
  if (weights.empty()) weights.assign(ranks.size(), 1.0);
  STARLING_CHECK_ARG(weights.size() == ranks.size(), weights.size(), " weights for ", ranks.size(), " ranks");
  CheckWeights(weights);
  STARLING_CHECK_ARG(std::isfinite(args.self_weight) && args.self_weight >= 0, "self_weight ", args.self_weight,
                     " must be finite and >= 0");
  return std::make_unique<TransferOp>(std::move(window), kind, tensor, std::move(ranks), std::move(weights),
                                      get ? 1.0 : args.self_weight, args.require_mutex);
}

std::unique_ptr<runtime::Op> MakeRemoteMutex(runtime::Context& context, std::shared_ptr<Window> window,
                                             std::vector<int> ranks, bool acquire) {
  if (ranks.empty()) ranks = window->out_neighbors();
  std::set<int> seen;
  for (int r : ranks) {
    STARLING_CHECK_ARG(r >= 0 && r < context.size(), "rank ", r, " is out of range [0, ", context.size(), ")");
    STARLING_CHECK_ARG(r != context.rank(), "rank ", r, " is this rank: use for_self = 1 for this rank's mutexes");
    STARLING_CHECK_ARG(seen.insert(r).second, "rank ", r, " is listed twice");
  }
  std::sort(ranks.begin(), ranks.end());
  return std::make_unique<RemoteMutexOp>(std::move(window), std::move(ranks), acquire);
}

std::shared_ptr<Window> FindWindow(runtime::Context& context, const std::string& name) {
  return context.Extension<Registry>().Find(name);
}

std::vector<std::string> WindowNames(runtime::Context& context) { return context.Extension<Registry>().Names(); }

void SetAssociatedP(runtime::Context& context, bool enabled) {
  context.Extension<Registry>().associated_p.store(enabled);
}

bool AssociatedP(runtime::Context& context) { return context.Extension<Registry>().associated_p.load(); }

void CheckInNeighbors(const Window& window, const std::vector<int>& ranks, const char* what) {
  std::set<int> seen;
  for (int r : ranks) {
    STARLING_CHECK_ARG(window.SlotOf(r) >= 0, what, ": rank ", r, " is not an in-neighbor (window '", window.name(),
                       "')");
    STARLING_CHECK_ARG(seen.insert(r).second, what, ": rank ", r, " is listed twice");
  }
}

}  // namespace starling::windows

namespace starling::windows {

void DetachForRepair(runtime::Context& context) {
  Registry& registry = context.Extension<Registry>();
  if (registry.Names().empty()) return;
  context.SetBackgroundService(nullptr, nullptr);
  registry.service.Stop(context, 0.0);  // its receives are on the old communicators
}

void AttachAfterRepair(runtime::Context& context, const runtime::RepairResult& result) {
  Registry& registry = context.Extension<Registry>();
  const std::vector<std::string> names = registry.Names();
  if (names.empty()) return;
  std::shared_ptr<const runtime::TopologyState> topology = context.topology();
  for (const std::string& name : names) {
    std::shared_ptr<Window> window = registry.Find(name);
    window->Reshape(context.rank(), context.size(), topology->graph->in_neighbors(context.rank()),
                    topology->graph->out_neighbors(context.rank()), topology, result.old_to_new);
  }
  StartService(context, registry);
}

}  // namespace starling::windows
