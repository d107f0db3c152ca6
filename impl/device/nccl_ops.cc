#include "impl/device/nccl_ops.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "impl/common/error.h"
#include "impl/device/gpu_state.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/group.h"
#include "impl/ops/neighbor.h"
#include "impl/ops/sequence.h"
#include "impl/runtime/wait_monitor.h"

namespace starling::device {
namespace {

using ops::OpKind;

// Operations of different communicators must not run concurrently: NCCL documents that
// this can deadlock (each kernel waits for its peers while any CUDA call may synchronize
// the device), and that operations on different communicators must be issued "at
// different epochs with a locking mechanism", in the same order on every rank. So every
// NCCL-path operation of this process takes a ticket when the application makes the call
// (program order), and runs its NCCL part only when its ticket is served, from its first
// NCCL call until its stream is done (its MPI agreement comes before). Ranks that call
// in the same order therefore take the lock in the same order; calls on several contexts
// from threads that race are the application's to order (README, GPUs). The
// application's own NCCL work (torch.distributed) is not covered.
class NcclTurns {
 public:
  static NcclTurns& Get() {
    static NcclTurns* turns = new NcclTurns;  // never destroyed: waits may run at exit
    return *turns;
  }
  uint64_t Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_++;
  }
  bool Serving(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    return serving_ == ticket;
  }
  // The turn is over (ran, failed, or never ran): the next live ticket is served.
  void Done(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ticket != serving_) {
      skipped_.insert(ticket);
      return;
    }
    ++serving_;
    while (skipped_.erase(serving_) != 0) ++serving_;
  }

 private:
  std::mutex mutex_;
  uint64_t next_ = 0, serving_ = 0;
  std::set<uint64_t> skipped_;
};

// Elements per chunk when each element needs `bytes_per_element` bytes of scratch: the
// scratch stays within the cap (STARLING_GPU_SCRATCH_BYTES), whatever the tensor's size.
uint32_t ChunkElements(size_t cap, size_t bytes_per_element) {
  const size_t elements = std::max<size_t>(1, cap / std::max<size_t>(1, bytes_per_element));
  return static_cast<uint32_t>(std::min<size_t>(elements, size_t{1} << 30));
}

// The base of every NCCL-path op: the caller's stream event, the agreement, the wait.
class NcclOp : public runtime::Op {
 public:
  NcclOp(GpuState& gpu, std::string description)
      : gpu_(gpu), description_(std::move(description)), ticket_(NcclTurns::Get().Take()) {
    struct Unless {  // a constructor that throws gives its turn back
      uint64_t ticket;
      bool ok = false;
      ~Unless() {
        if (!ok) NcclTurns::Get().Done(ticket);
      }
    } unless{ticket_};
    ready_ = gpu_.RecordCallerStream();
    unless.ok = true;
  }
  ~NcclOp() override {
    if (!turn_done_) NcclTurns::Get().Done(ticket_);
    gpu_.GiveEvent(ready_);
  }
  std::string Describe() const override { return description_; }

  void Run(runtime::Context& context) override {
    struct Turn {  // over when Run ends, however it ends
      NcclOp& op;
      ~Turn() {
        op.turn_done_ = true;
        NcclTurns::Get().Done(op.ticket_);
      }
    } turn{*this};
    gpu_.BindOwnedThread();
    CheckCommunicator();
    Prepare(context);
    WaitForTurn(context);
    CheckCommunicator();
    stream_ = gpu_.nccl_stream();
    try {
      Check(plugin()->stream_wait_event(stream_, ready_), "stream_wait_event");
      Enqueue(context);
    } catch (...) {
      // What was queued may still read or write this op's scratch: let it finish (or
      // fail under the monitor) before the op, and with it the scratch, goes.
      try {
        WaitForStream(context);
      } catch (...) {
      }
      throw;
    }
    WaitForStream(context);
  }

 protected:
  virtual ops::Signature Signature() const = 0;
  // Before any NCCL call and outside the process lock: every rank checks the call's
  // signature (ops that gather with it anyway override this with their gather).
  virtual void Prepare(runtime::Context& context) { AgreeOnCall(context); }
  void AgreeOnCall(runtime::Context& context) {
    ops::Signature sig = Signature();
    sig.seq = ops::NextSequence(context, sig.kind);
    ops::Agree(context, ops::WorldGroup(context), sig, Label());
  }
  // Queues the operation's NCCL calls and kernels on stream_.
  virtual void Enqueue(runtime::Context& context) = 0;

  const starling_device_plugin_t* plugin() const { return &*gpu_.plugin(); }
  void Check(int status, const char* call) const { gpu_.plugin().Check(status, call); }
  void* comm() const { return gpu_.nccl_comm(); }

  // Groups NCCL calls; the group is ended even when a call in it fails.
  template <typename Calls>
  void Grouped(Calls calls) {
    Check(plugin()->nccl_group_start(), "ncclGroupStart");
    try {
      calls();
    } catch (...) {
      plugin()->nccl_group_end();
      throw;
    }
    Check(plugin()->nccl_group_end(), "ncclGroupEnd");
  }

  GpuState& gpu_;
  void* stream_ = nullptr;

 private:
  // After an abort, a timeout or an asynchronous error the communicator is gone: fail
  // fast, saying why, instead of handing NCCL a freed communicator.
  void CheckCommunicator() const {
    if (comm() == nullptr)
      Fail(Code::kTransport, "the NCCL path of this context is unusable: its NCCL communicator was aborted (",
           gpu_.NcclFailure(), "); destroy the context (or repair it)");
  }

  // Under the wait monitor: an abort or STARLING_TIMEOUT_SECONDS ends it.
  void WaitForTurn(runtime::Context& context) {
    NcclTurns& turns = NcclTurns::Get();
    if (turns.Serving(ticket_)) return;
    runtime::WaitMonitor monitor(context, label_);
    for (int polls = 0; !turns.Serving(ticket_); ++polls) {
      monitor.CheckAborted();
      if (polls % 64 == 63)
        monitor.Check([] { return runtime::Awaited{{}, "an earlier NCCL operation of another context in this process"}; });
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 1000 ? 1 : 50));
    }
  }

  // An asynchronous NCCL error (ncclCommGetAsyncError): a network error, a peer gone.
  void CheckAsyncError() const {
    int state = 0;
    Check(plugin()->nccl_comm_status(comm(), &state), "nccl_comm_status");
    if (state == 2)
      Fail(Code::kTransport, "NCCL reported an asynchronous error during ", description_, ": ",
           plugin()->last_error());
  }

  // Polls the stream so that abort, a dead peer, an asynchronous NCCL error and
  // STARLING_TIMEOUT_SECONDS end the wait: NCCL itself waits forever for a peer that is
  // gone, and tells nobody. Every other rank takes part in the operation, so all of them
  // are awaited (probed when they run on this host). On failure the communicator is
  // aborted (its kernels return) and the other ranks are told, so that they abort theirs
  // too instead of waiting for this one; then the error is raised.
  void WaitForStream(runtime::Context& context) {
    void* done = gpu_.TakeEvent();
    struct GiveBack {
      GpuState& gpu;
      void* event;
      ~GiveBack() { gpu.GiveEvent(event); }
    } give_back{gpu_, done};
    Check(plugin()->event_record(done, stream_), "event_record");
    runtime::WaitMonitor monitor(context, label_);
    auto everyone = [&context] {
      runtime::Awaited a;
      for (int r = 0; r < context.size(); ++r)
        if (r != context.rank()) a.ranks.insert(r);
      a.text = "the other ranks (an NCCL operation)";
      return a;
    };
    for (int polls = 0;; ++polls) {
      const int status = plugin()->event_query(done);
      if (status == 0) return;
      try {
        if (status != 1) Check(status, "the NCCL stream (event_query)");
        monitor.CheckAborted();
        if (polls % 64 == 63) {
          CheckAsyncError();
          monitor.Check(everyone);
        }
      } catch (const Error& e) {
        gpu_.AbortNccl(Str(description_, ": ", e.what()));
        context.NotifyPeerFailure(Str("rank ", context.rank(), " aborted its NCCL communicator (", e.what(), ")"),
                                  {});
        throw;
      }
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::string description_;
  uint64_t ticket_;
  bool turn_done_ = false;
  void* ready_ = nullptr;
  LazyText label_ = [this] { return description_; };
};

// Float16/bfloat16 reduce in float32 and int16 in int32; the rest natively.
DType Widened(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: return DType::kFloat32;
    case DType::kInt16: return DType::kInt32;
    default: return dtype;
  }
}

// allreduce, by case:
//  - MIN/MAX of floating dtypes: NCCL's are fminf/fmaxf, where a NaN loses to a number;
//    Starling's (CPU, staged) propagate NaNs. So every rank's chunk is gathered
//    (ncclAllGather) and reduced in rank order by our reduce kernel: the CPU path's
//    semantics and the same bits on every rank. Scratch: ranks x chunk.
//  - float16/bfloat16/int16: widened chunk by chunk into one scratch buffer, reduced by
//    NCCL, divided (AVERAGE), narrowed into out.
//  - the rest: ncclAllReduce in place of the caller's tensors, no scratch.
// Chunks keep the scratch within STARLING_GPU_SCRATCH_BYTES (the chunk is part of the
// agreed signature, so ranks configured differently get MISMATCH, not a hang).
class AllreduceOp : public NcclOp {
 public:
  AllreduceOp(GpuState& gpu, const TensorView& in, const TensorView& out, ReduceOp op, const std::string& name,
              int ranks)
      : NcclOp(gpu, ops::DescribeOp("allreduce", name, Str(ReduceOpName(op), ", ", in.Describe(), ", nccl"))),
        in_(in), out_(out), op_(op) {
    gather_ = IsFloating(in.dtype) && (op == ReduceOp::kMin || op == ReduceOp::kMax);
    if (gather_) {
      chunk_ = ChunkElements(gpu.scratch_cap(), static_cast<size_t>(ranks) * DTypeSize(in.dtype));
    } else if (Widened(in.dtype) != in.dtype) {
      chunk_ = ChunkElements(gpu.scratch_cap(), DTypeSize(Widened(in.dtype)));
    }
  }

 private:
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclAllreduce;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.reduce = static_cast<uint8_t>(op_);
    sig.chunk = chunk_;
    return sig;
  }

  void Enqueue(runtime::Context& context) override {
    const size_t n = in_.numel;
    if (n == 0) return;
    if (gather_) return GatherAndReduce(context);
    const int nccl_op = static_cast<int>(op_ == ReduceOp::kAverage ? ReduceOp::kSum : op_);
    const DType wide = Widened(in_.dtype);
    const int dtype = static_cast<int>(in_.dtype), wide_dtype = static_cast<int>(wide);
    if (wide == in_.dtype) {
      Check(plugin()->nccl_all_reduce(in_.data, out_.data, n, dtype, nccl_op, comm(), stream_), "ncclAllReduce");
      if (op_ == ReduceOp::kAverage) Check(plugin()->divide(out_.data, n, dtype, context.size(), stream_), "divide");
      return;
    }
    // One scratch buffer for every chunk: the stream runs them one after another.
    scratch_.push_back(gpu_.TakeDevice(std::min<size_t>(n, chunk_) * DTypeSize(wide)));
    void* wide_buffer = scratch_.back().data();
    const size_t elem = DTypeSize(in_.dtype);
    for (size_t first = 0; first < n; first += chunk_) {
      const size_t count = std::min<size_t>(chunk_, n - first);
      const char* src = static_cast<const char*>(in_.data) + first * elem;
      char* dst = static_cast<char*>(out_.data) + first * elem;
      Check(plugin()->convert(wide_buffer, wide_dtype, src, dtype, count, stream_), "convert");
      Check(plugin()->nccl_all_reduce(wide_buffer, wide_buffer, count, wide_dtype, nccl_op, comm(), stream_),
            "ncclAllReduce");
      if (op_ == ReduceOp::kAverage)
        Check(plugin()->divide(wide_buffer, count, wide_dtype, context.size(), stream_), "divide");
      Check(plugin()->convert(dst, dtype, wide_buffer, wide_dtype, count, stream_), "convert");
    }
  }

  void GatherAndReduce(runtime::Context& context) {
    const size_t n = in_.numel, elem = DTypeSize(in_.dtype);
    const int ranks = context.size(), dtype = static_cast<int>(in_.dtype), op = static_cast<int>(op_);
    scratch_.push_back(gpu_.TakeDevice(std::min<size_t>(n, chunk_) * elem * static_cast<size_t>(ranks)));
    char* gathered = scratch_.back().data();
    for (size_t first = 0; first < n; first += chunk_) {
      const size_t count = std::min<size_t>(chunk_, n - first), bytes = count * elem;
      const char* src = static_cast<const char*>(in_.data) + first * elem;
      char* dst = static_cast<char*>(out_.data) + first * elem;
      Check(plugin()->nccl_all_gather(src, gathered, bytes, comm(), stream_), "ncclAllGather");
      Check(plugin()->memcpy_async(dst, gathered, bytes, stream_), "memcpy_async");
      for (int r = 1; r < ranks; ++r)
        Check(plugin()->reduce(dst, gathered + static_cast<size_t>(r) * bytes, count, dtype, op, stream_), "reduce");
    }
  }

  TensorView in_, out_;
  ReduceOp op_;
  bool gather_ = false;
  uint32_t chunk_ = 0;  // elements per chunk (0: not chunked)
  // Reused only after this op's stream work is done: the op waits for the stream
  // before it returns (and with it the buffers).
  std::vector<PooledBuffer> scratch_;
};

class BroadcastOp : public NcclOp {
 public:
  BroadcastOp(GpuState& gpu, const TensorView& in, const TensorView& out, int root, const std::string& name)
      : NcclOp(gpu, ops::DescribeOp("broadcast", name, Str(in.Describe(), ", root ", root, ", nccl"))),
        in_(in), out_(out), root_(root) {}

 private:
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclBroadcast;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.root = root_;
    return sig;
  }
  void Enqueue(runtime::Context&) override {
    if (in_.bytes == 0) return;
    Check(plugin()->nccl_broadcast(in_.data, out_.data, in_.bytes, root_, comm(), stream_), "ncclBroadcast");
  }

  TensorView in_, out_;
  int root_;
};

class AllgatherOp : public NcclOp {
 public:
  AllgatherOp(GpuState& gpu, const TensorView& in, const TensorView& out, int64_t* first_dims,
              const std::string& name)
      : NcclOp(gpu, ops::DescribeOp("allgather", name, Str(in.Describe(), ", nccl"))),
        in_(in), out_(out), first_dims_(first_dims) {}

 private:
  struct Row {
    int64_t first_dim;
    int64_t out_rows;  // so that every rank can tell whether every output fits
    uint32_t trailing;
    uint32_t pad;
  };
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclAllgather;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(sizeof(Row));
    return sig;
  }

  // A gather of every rank's first dimension, trailing shape and output size, which is
  // also the call's agreement (before any NCCL call): one round instead of two.
  void Prepare(runtime::Context& context) override {
    const int size = context.size();
    Row mine{in_.first_dim(), out_.ndim() == std::max(in_.ndim(), 1) ? out_.first_dim() : -1, TrailingShapeHash(in_), 0};
    ops::Signature sig = Signature();
    sig.seq = ops::NextSequence(context, sig.kind);
    ops::Exchange ex(context, transport::Channel::kCollective, Label());
    const std::vector<const char*> all = ops::DisseminationGather(context, ops::WorldGroup(context), sig, &mine,
                                                                  sizeof mine, ex);
    std::vector<Row> rows(static_cast<size_t>(size));
    std::vector<int64_t> dims(static_cast<size_t>(size));
    int64_t total = 0;
    bool equal = true;
    for (int r = 0; r < size; ++r) {
      std::memcpy(&rows[static_cast<size_t>(r)], all[static_cast<size_t>(r)], sizeof(Row));
      const Row& row = rows[static_cast<size_t>(r)];
      STARLING_CHECK(row.trailing == mine.trailing, Code::kMismatch, "rank ", r,
                     " passed a tensor whose dimensions after the first differ from this rank's ", in_.Describe());
      dims[static_cast<size_t>(r)] = row.first_dim;
      total += row.first_dim;
      equal = equal && row.first_dim == mine.first_dim;
    }
    // Every rank checks every output, so all of them fail together (before any NCCL
    // call, which would wait forever for a rank that gave up).
    STARLING_CHECK_ARG(mine.out_rows == total, "out is ", out_.Describe(), " but the ranks' tensors stack to ", total,
                       " rows");
    for (int r = 0; r < size; ++r)
      STARLING_CHECK(rows[static_cast<size_t>(r)].out_rows == total, Code::kMismatch, "rank ", r,
                     "'s output does not hold the ", total, " gathered rows");
    if (first_dims_) std::copy(dims.begin(), dims.end(), first_dims_);
    dims_ = std::move(dims);
    equal_ = equal;
  }

  void Enqueue(runtime::Context& context) override {
    const int size = context.size(), rank = context.rank();
    const std::vector<int64_t>& dims = dims_;
    const size_t row_bytes = in_.row_bytes();
    if (equal_) {
      if (in_.bytes > 0) Check(plugin()->nccl_all_gather(in_.data, out_.data, in_.bytes, comm(), stream_), "ncclAllGather");
      return;
    }
    Grouped([&] {
      size_t offset = 0;
      for (int r = 0; r < size; ++r) {
        const size_t bytes = static_cast<size_t>(dims[static_cast<size_t>(r)]) * row_bytes;
        char* block = static_cast<char*>(out_.data) + offset;
        if (r == rank) {
          if (bytes > 0) Check(plugin()->memcpy_async(block, in_.data, bytes, stream_), "memcpy_async");
        } else {
          if (in_.bytes > 0) Check(plugin()->nccl_send(in_.data, in_.bytes, r, comm(), stream_), "ncclSend");
          if (bytes > 0) Check(plugin()->nccl_recv(block, bytes, r, comm(), stream_), "ncclRecv");
        }
        offset += bytes;
      }
    });
  }

  TensorView in_, out_;
  int64_t* first_dims_;
  std::vector<int64_t> dims_;  // every rank's first dimension (Prepare)
  bool equal_ = false;
};

// reduce_scatter, by case (the block counts are part of the agreed signature, so every
// rank takes the same case):
//  - equal blocks, and SUM, AVERAGE or integer MIN/MAX: ncclReduceScatter, in place when
//    out is this rank's block of in; float16/bfloat16/int16 are widened chunk by chunk
//    (chunk c of every block side by side in one scratch buffer) and narrowed into out,
//    as allreduce does.
//  - blocks of different sizes, or floating MIN/MAX (a NaN must win): every rank receives
//    each rank's part of its own block (grouped ncclSend/ncclRecv, chunk by chunk) and
//    our reduce kernel combines them in rank order: the CPU path's bits for inputs it
//    gathers (up to 64 KiB), and a NaN wins.
class ReduceScatterOp : public NcclOp {
 public:
  ReduceScatterOp(GpuState& gpu, const TensorView& in, const TensorView& out, std::vector<int64_t> counts,
                  ReduceOp op, const std::string& name, int ranks)
      : NcclOp(gpu, ops::DescribeOp("reduce_scatter", name,
                                    Str(ReduceOpName(op), ", ", in.Describe(), " -> ", out.Describe(), ", nccl"))),
        in_(in), out_(out), counts_(std::move(counts)), op_(op) {
    offsets_.assign(counts_.size() + 1, 0);
    for (size_t r = 0; r < counts_.size(); ++r) offsets_[r + 1] = offsets_[r] + static_cast<size_t>(counts_[r]);
    const bool equal = std::adjacent_find(counts_.begin(), counts_.end(), std::not_equal_to<>()) == counts_.end();
    direct_ = equal && !(IsFloating(in.dtype) && (op == ReduceOp::kMin || op == ReduceOp::kMax));
    const DType wide = Widened(in.dtype);
    if (!direct_) {
      chunk_ = ChunkElements(gpu.scratch_cap(), static_cast<size_t>(ranks) * DTypeSize(in.dtype));
    } else if (wide != in.dtype) {
      chunk_ = ChunkElements(gpu.scratch_cap(), static_cast<size_t>(ranks) * DTypeSize(wide));
    }
  }

 private:
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclReduceScatter;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.reduce = static_cast<uint8_t>(op_);
    sig.root = static_cast<int32_t>(ops::HashBlockCounts(counts_));
    sig.chunk = chunk_;
    return sig;
  }

  void Enqueue(runtime::Context& context) override {
    if (in_.numel == 0) return;
    if (!direct_) return GatherAndReduce(context);
    const size_t block = static_cast<size_t>(counts_[0]), elem = DTypeSize(in_.dtype);
    const int nccl_op = static_cast<int>(op_ == ReduceOp::kAverage ? ReduceOp::kSum : op_);
    const DType wide = Widened(in_.dtype);
    const int dtype = static_cast<int>(in_.dtype), wide_dtype = static_cast<int>(wide);
    const int ranks = context.size(), rank = context.rank();
    if (wide == in_.dtype) {
      Check(plugin()->nccl_reduce_scatter(in_.data, out_.data, block, dtype, nccl_op, comm(), stream_),
            "ncclReduceScatter");
      if (op_ == ReduceOp::kAverage) Check(plugin()->divide(out_.data, block, dtype, ranks, stream_), "divide");
      return;
    }
    const size_t wide_elem = DTypeSize(wide);
    scratch_.push_back(gpu_.TakeDevice(std::min<size_t>(block, chunk_) * wide_elem * static_cast<size_t>(ranks)));
    char* wide_buffer = scratch_.back().data();
    for (size_t first = 0; first < block; first += chunk_) {
      const size_t count = std::min<size_t>(chunk_, block - first);
      for (int r = 0; r < ranks; ++r)
        Check(plugin()->convert(wide_buffer + static_cast<size_t>(r) * count * wide_elem, wide_dtype,
                                static_cast<const char*>(in_.data) + (static_cast<size_t>(r) * block + first) * elem,
                                dtype, count, stream_),
              "convert");
      char* mine = wide_buffer + static_cast<size_t>(rank) * count * wide_elem;
      Check(plugin()->nccl_reduce_scatter(wide_buffer, mine, count, wide_dtype, nccl_op, comm(), stream_),
            "ncclReduceScatter");
      if (op_ == ReduceOp::kAverage) Check(plugin()->divide(mine, count, wide_dtype, ranks, stream_), "divide");
      Check(plugin()->convert(static_cast<char*>(out_.data) + first * elem, dtype, mine, wide_dtype, count, stream_),
            "convert");
    }
  }

  void GatherAndReduce(runtime::Context& context) {
    const int ranks = context.size(), rank = context.rank();
    const int dtype = static_cast<int>(in_.dtype), op = static_cast<int>(op_);
    const size_t elem = DTypeSize(in_.dtype), mine = static_cast<size_t>(counts_[static_cast<size_t>(rank)]);
    const size_t longest = static_cast<size_t>(*std::max_element(counts_.begin(), counts_.end()));
    const char* in = static_cast<const char*>(in_.data);
    const char* own = in + offsets_[static_cast<size_t>(rank)] * elem;
    // In place, out is this rank's block: its part is copied aside before out is written.
    const bool in_place = out_.data == own && mine > 0;
    char* gathered = nullptr;
    if (mine > 0) {
      scratch_.push_back(gpu_.TakeDevice(std::min<size_t>(mine, chunk_) * elem * static_cast<size_t>(ranks)));
      gathered = scratch_.back().data();
    }
    for (size_t first = 0; first < longest; first += chunk_) {
      const size_t count = mine > first ? std::min<size_t>(chunk_, mine - first) : 0, bytes = count * elem;
      auto part = [&](int q) { return gathered + static_cast<size_t>(q) * bytes; };
      Grouped([&] {
        for (int r = 0; r < ranks; ++r) {
          const size_t theirs = static_cast<size_t>(counts_[static_cast<size_t>(r)]);
          if (r == rank || theirs <= first) continue;
          Check(plugin()->nccl_send(in + (offsets_[static_cast<size_t>(r)] + first) * elem,
                                    std::min<size_t>(chunk_, theirs - first) * elem, r, comm(), stream_),
                "ncclSend");
        }
        for (int q = 0; q < ranks && count > 0; ++q)
          if (q != rank) Check(plugin()->nccl_recv(part(q), bytes, q, comm(), stream_), "ncclRecv");
      });
      if (count == 0) continue;
      const char* own_chunk = own + first * elem;
      char* dst = static_cast<char*>(out_.data) + first * elem;
      if (in_place && rank != 0) {
        Check(plugin()->memcpy_async(part(rank), own_chunk, bytes, stream_), "memcpy_async");
        own_chunk = part(rank);
      }
      auto input = [&](int q) -> const void* { return q == rank ? own_chunk : part(q); };
      if (input(0) != dst) Check(plugin()->memcpy_async(dst, input(0), bytes, stream_), "memcpy_async");
      for (int q = 1; q < ranks; ++q)
        Check(plugin()->reduce(dst, input(q), count, dtype, op, stream_), "reduce");
      if (op_ == ReduceOp::kAverage) Check(plugin()->divide(dst, count, dtype, ranks, stream_), "divide");
    }
  }

  TensorView in_, out_;
  std::vector<int64_t> counts_;  // elements of every rank's block
  std::vector<size_t> offsets_;  // where each block starts in in, in elements
  ReduceOp op_;
  bool direct_ = false;
  uint32_t chunk_ = 0;  // elements per chunk (0: not chunked)
  std::vector<PooledBuffer> scratch_;
};

// alltoall: one group of ncclSend/ncclRecv, a pair per peer, straight from in into out,
// and a device copy for this rank's own block. With per-rank counts every rank first
// gathers every rank's counts (as the CPU path does: this is also the agreement), so a
// count one rank sends but its peer does not expect fails on every rank before any
// NCCL call instead of hanging in it.
class AlltoallOp : public NcclOp {
 public:
  AlltoallOp(GpuState& gpu, const TensorView& in, const TensorView& out, std::vector<int64_t> send,
             std::vector<int64_t> recv, bool varying, const std::string& name)
      : NcclOp(gpu, ops::DescribeOp("alltoall", name, Str(in.Describe(), " -> ", out.Describe(), ", nccl"))),
        in_(in), out_(out), send_(std::move(send)), recv_(std::move(recv)), varying_(varying) {}

 private:
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclAlltoall;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.extra = varying_ ? 1 : 0;
    sig.count = varying_ ? 0 : static_cast<int64_t>(in_.numel);
    return sig;
  }

  void Prepare(runtime::Context& context) override {
    if (!varying_) return AgreeOnCall(context);
    ops::Signature sig = Signature();
    sig.seq = ops::NextSequence(context, sig.kind);
    ops::AgreeOnAlltoallCounts(context, ops::WorldGroup(context), sig, send_, recv_, Describe(), Label());
  }

  void Enqueue(runtime::Context& context) override {
    const int n = context.size(), rank = context.rank();
    const size_t elem = DTypeSize(in_.dtype);
    std::vector<size_t> send_at(static_cast<size_t>(n) + 1, 0), recv_at(static_cast<size_t>(n) + 1, 0);
    for (int q = 0; q < n; ++q) {
      send_at[q + 1] = send_at[q] + static_cast<size_t>(send_[static_cast<size_t>(q)]) * elem;
      recv_at[q + 1] = recv_at[q] + static_cast<size_t>(recv_[static_cast<size_t>(q)]) * elem;
    }
    const char* src = static_cast<const char*>(in_.data);
    char* dst = static_cast<char*>(out_.data);
    const size_t own = send_at[rank + 1] - send_at[rank];
    if (own > 0) Check(plugin()->memcpy_async(dst + recv_at[rank], src + send_at[rank], own, stream_), "memcpy_async");
    if (n == 1) return;
    Grouped([&] {
      for (int q = 0; q < n; ++q) {
        if (q == rank) continue;
        const size_t out_bytes = send_at[q + 1] - send_at[q], in_bytes = recv_at[q + 1] - recv_at[q];
        if (out_bytes > 0) Check(plugin()->nccl_send(src + send_at[q], out_bytes, q, comm(), stream_), "ncclSend");
        if (in_bytes > 0) Check(plugin()->nccl_recv(dst + recv_at[q], in_bytes, q, comm(), stream_), "ncclRecv");
      }
    });
  }

  TensorView in_, out_;
  std::vector<int64_t> send_, recv_;  // elements per rank
  bool varying_;
};

// neighbor_allreduce, in chunks: each chunk is scaled for the weighted destinations,
// sent to and received from the neighbors in one group, and combined into out by our
// kernel. Every scratch buffer (one per neighbor received from and per destination with a
// weight other than 1) holds one chunk of STARLING_GPU_SCRATCH_BYTES / 4, so the scratch
// does not grow with the tensor. In place (out == in) works: a chunk of out is written
// only after that chunk of in was sent.
class NeighborAllreduceOp : public NcclOp {
 public:
  NeighborAllreduceOp(GpuState& gpu, const TensorView& in, const TensorView& out,
                      std::shared_ptr<const ops::NeighborPlan> plan, const std::string& name)
      : NcclOp(gpu, ops::DescribeOp("neighbor_allreduce", name,
                                    Str(in.Describe(), plan->dynamic ? ", dynamic" : "", ", nccl"))),
        in_(in), out_(out), plan_(std::move(plan)),
        chunk_(ChunkElements(gpu.scratch_cap() / kBuffersPerCap, DTypeSize(in.dtype))) {}

 private:
  static constexpr size_t kBuffersPerCap = 4;

  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclNeighborAllreduce;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.chunk = chunk_;  // senders and receivers must cut the same chunks
    return sig;
  }

  void Prepare(runtime::Context& context) override {
    AgreeOnCall(context);
    const ops::NeighborPlan& plan = *plan_;
    if (plan.check) ops::CheckSendRecvMatch(context, plan.send_ranks, plan.recv_ranks,
                                           ops::NextSequence(context, OpKind::kNcclNeighborAllreduce), Label());
  }

  void Enqueue(runtime::Context&) override {
    const ops::NeighborPlan& plan = *plan_;
    const size_t n = in_.numel, elem = DTypeSize(in_.dtype);
    const int dtype = static_cast<int>(in_.dtype);
    if (n == 0) return;
    const size_t first_chunk = std::min<size_t>(n, chunk_);
    // Per destination: a scaled copy of the chunk, or NULL to send the tensor itself.
    std::vector<char*> scaled;
    for (double w : plan.send_weights) {
      if (w == 1.0) {
        scaled.push_back(nullptr);
        continue;
      }
      scratch_.push_back(gpu_.TakeDevice(first_chunk * elem));
      scaled.push_back(scratch_.back().data());
    }
    std::vector<char*> received;
    for (size_t s = 0; s < plan.recv_ranks.size(); ++s) {
      scratch_.push_back(gpu_.TakeDevice(first_chunk * elem));
      received.push_back(scratch_.back().data());
    }
    // out = self_weight * in + sum w_s * received_s; uniform: every weight 1 / (k + 1).
    std::vector<size_t> used;
    std::vector<double> weights;
    const double uniform = 1.0 / static_cast<double>(received.size() + 1);
    for (size_t s = 0; s < received.size(); ++s) {
      const double w = plan.uniform ? uniform : plan.recv_weights[s];
      if (!plan.uniform && w == 0.0) continue;
      used.push_back(s);
      weights.push_back(w);
    }
    for (size_t first = 0; first < n; first += chunk_) {
      const size_t count = std::min<size_t>(chunk_, n - first), bytes = count * elem;
      const char* x_chunk = static_cast<const char*>(in_.data) + first * elem;
      char* out_chunk = static_cast<char*>(out_.data) + first * elem;
      for (size_t d = 0; d < scaled.size(); ++d)
        if (scaled[d] != nullptr)
          Check(plugin()->weighted_sum(scaled[d], x_chunk, plan.send_weights[d], nullptr, nullptr, 0, count, dtype,
                                       stream_),
                "weighted_sum");
      Grouped([&] {
        for (size_t d = 0; d < plan.send_ranks.size(); ++d)
          Check(plugin()->nccl_send(scaled[d] != nullptr ? scaled[d] : x_chunk, bytes, plan.send_ranks[d], comm(),
                                    stream_),
                "ncclSend");
        for (size_t s = 0; s < plan.recv_ranks.size(); ++s)
          Check(plugin()->nccl_recv(received[s], bytes, plan.recv_ranks[s], comm(), stream_), "ncclRecv");
      });
      std::vector<const void*> inputs;
      for (size_t s : used) inputs.push_back(received[s]);
      double self_weight = plan.uniform ? uniform : plan.self_weight;
      const void* x = x_chunk;
      size_t done = 0;
      do {  // STARLING_DEVICE_MAX_INPUTS per kernel; longer sums continue from out
        const int k = static_cast<int>(std::min<size_t>(inputs.size() - done, STARLING_DEVICE_MAX_INPUTS));
        Check(plugin()->weighted_sum(out_chunk, x, self_weight, inputs.data() + done, weights.data() + done, k, count,
                                     dtype, stream_),
              "weighted_sum");
        done += static_cast<size_t>(k);
        x = out_chunk;
        self_weight = 1.0;
      } while (done < inputs.size());
    }
  }

  TensorView in_, out_;
  std::shared_ptr<const ops::NeighborPlan> plan_;
  uint32_t chunk_;  // elements per chunk
  std::vector<PooledBuffer> scratch_;
};

// neighbor_allgather: every rank's first dimension is gathered over MPI in the call's
// agreement (dtype, row size and trailing shape must agree on every rank, as the count
// of neighbor_allreduce on this path); each rank checks that its sources' rows fill out,
// and a one-byte second round tells every rank whether all did, so a wrong out fails on
// every rank before any NCCL call. Then one group: in to every destination, each
// source's rows straight into their place in out.
class NeighborAllgatherOp : public NcclOp {
 public:
  NeighborAllgatherOp(GpuState& gpu, const TensorView& in, const TensorView& out, int64_t* first_dims,
                      std::shared_ptr<const ops::NeighborPlan> plan, const std::string& name)
      : NcclOp(gpu, ops::DescribeOp("neighbor_allgather", name,
                                    Str(in.Describe(), plan->dynamic ? ", dynamic" : "", ", nccl"))),
        in_(in), out_(out), first_dims_(first_dims), plan_(std::move(plan)) {}

 private:
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclNeighborAllgather;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.row_bytes());
    sig.root = static_cast<int32_t>(TrailingShapeHash(in_) & 0x7fffffff);
    return sig;
  }

  void Prepare(runtime::Context& context) override {
    const ops::NeighborPlan& plan = *plan_;
    const ops::Group world = ops::WorldGroup(context);
    ops::Signature sig = Signature();
    sig.seq = ops::NextSequence(context, sig.kind);
    const int64_t mine = in_.first_dim();
    std::vector<int64_t> dims;
    {
      ops::Exchange ex(context, transport::Channel::kCollective, Label());
      const std::vector<const char*> all = ops::DisseminationGather(context, world, sig, &mine, sizeof mine, ex);
      for (int r : plan.recv_ranks) {
        int64_t d;
        std::memcpy(&d, all[static_cast<size_t>(r)], sizeof d);
        dims.push_back(d);
      }
    }
    if (plan.check)
      ops::CheckSendRecvMatch(context, plan.send_ranks, plan.recv_ranks,
                              ops::NextSequence(context, OpKind::kNcclNeighborAllgather), Label());
    int64_t total = 0;
    for (int64_t d : dims) total += d;
    const uint8_t fits = total == out_.first_dim() ? 1 : 0;
    ops::Signature verdict = Signature();
    verdict.seq = ops::NextSequence(context, verdict.kind);
    verdict.extra = 1;
    ops::Exchange ex(context, transport::Channel::kCollective, Label());
    const std::vector<const char*> all = ops::DisseminationGather(context, world, verdict, &fits, 1, ex);
    STARLING_CHECK(fits, Code::kMismatch, "out has first dimension ", out_.first_dim(), " but the sources send ",
                   total, " rows (use starling_neighbor_allgather_first_dims to size it)");
    for (int r = 0; r < context.size(); ++r)
      STARLING_CHECK(*all[static_cast<size_t>(r)] != 0, Code::kMismatch, "rank ", r,
                     "'s out does not hold the rows its sources send, so no rank runs this ", Describe());
    if (first_dims_) std::copy(dims.begin(), dims.end(), first_dims_);
    dims_ = std::move(dims);
  }

  void Enqueue(runtime::Context&) override {
    const ops::NeighborPlan& plan = *plan_;
    const size_t row_bytes = in_.row_bytes();
    Grouped([&] {
      if (in_.bytes > 0)
        for (int to : plan.send_ranks)
          Check(plugin()->nccl_send(in_.data, in_.bytes, to, comm(), stream_), "ncclSend");
      char* cursor = static_cast<char*>(out_.data);
      for (size_t s = 0; s < plan.recv_ranks.size(); ++s) {
        const size_t bytes = static_cast<size_t>(dims_[s]) * row_bytes;
        if (bytes > 0) Check(plugin()->nccl_recv(cursor, bytes, plan.recv_ranks[s], comm(), stream_), "ncclRecv");
        cursor += bytes;
      }
    });
  }

  TensorView in_, out_;
  int64_t* first_dims_;
  std::shared_ptr<const ops::NeighborPlan> plan_;
  std::vector<int64_t> dims_;  // the sources' first dimensions, in source order (Prepare)
};

}  // namespace

std::unique_ptr<runtime::Op> MakeNcclAllreduce(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               ReduceOp op, std::string name) {
  return std::make_unique<AllreduceOp>(context.Extension<GpuState>(), in, out, op, name, context.size());
}

std::unique_ptr<runtime::Op> MakeNcclBroadcast(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               int root, std::string name) {
  return std::make_unique<BroadcastOp>(context.Extension<GpuState>(), in, out, root, name);
}

std::unique_ptr<runtime::Op> MakeNcclAllgather(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               int64_t* first_dims, std::string name) {
  return std::make_unique<AllgatherOp>(context.Extension<GpuState>(), in, out, first_dims, name);
}

std::unique_ptr<runtime::Op> MakeNcclReduceScatter(runtime::Context& context, const TensorView& in,
                                                   const TensorView& out, const int64_t* counts, ReduceOp op,
                                                   std::string name) {
  std::vector<int64_t> blocks(static_cast<size_t>(context.size()), static_cast<int64_t>(out.numel));
  if (counts != nullptr) blocks.assign(counts, counts + context.size());
  return std::make_unique<ReduceScatterOp>(context.Extension<GpuState>(), in, out, std::move(blocks), op, name,
                                           context.size());
}

std::unique_ptr<runtime::Op> MakeNcclAlltoall(runtime::Context& context, const TensorView& in, const TensorView& out,
                                              const int64_t* send_counts, const int64_t* recv_counts,
                                              std::string name) {
  const size_t n = static_cast<size_t>(context.size());
  const bool varying = send_counts != nullptr;
  std::vector<int64_t> send(n, static_cast<int64_t>(in.numel / n)), recv = send;
  if (varying) {
    send.assign(send_counts, send_counts + n);
    recv.assign(recv_counts, recv_counts + n);
  }
  return std::make_unique<AlltoallOp>(context.Extension<GpuState>(), in, out, std::move(send), std::move(recv),
                                      varying, name);
}

std::unique_ptr<runtime::Op> MakeNcclNeighborAllgather(runtime::Context& context, const TensorView& in,
                                                       const TensorView& out, int64_t* first_dims,
                                                       const ops::NeighborArgs& args) {
  return std::make_unique<NeighborAllgatherOp>(context.Extension<GpuState>(), in, out, first_dims,
                                               ops::PlanFor(context, ops::AllgatherArgs(args)), args.name);
}

std::unique_ptr<runtime::Op> MakeNcclNeighborAllreduce(runtime::Context& context, const TensorView& in,
                                                       const TensorView& out, const ops::NeighborArgs& args) {
  return std::make_unique<NeighborAllreduceOp>(context.Extension<GpuState>(), in, out, ops::PlanFor(context, args),
                                               args.name);
}

}  // namespace starling::device
