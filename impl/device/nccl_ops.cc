#include "impl/device/nccl_ops.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "impl/common/error.h"
#include "impl/device/caller_stream.h"
#include "impl/device/gpu_state.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/group.h"
#include "impl/ops/neighbor.h"
#include "impl/runtime/wait_monitor.h"

namespace starling::device {
namespace {

using ops::OpKind;

// The base of every NCCL-path op: the caller's stream event, the agreement, the wait.
class NcclOp : public runtime::Op {
 public:
  NcclOp(GpuState& gpu, std::string description) : gpu_(gpu), description_(std::move(description)) {
    ready_ = gpu_.TakeEvent();
    const int status = gpu_.plugin()->event_record(ready_, CallerStream());
    if (status != 0) {
      const std::string why = gpu_.plugin()->last_error();
      gpu_.GiveEvent(ready_);
      ready_ = nullptr;
      Fail(Code::kDevice, "event_record on the caller's stream (starling_set_cuda_stream): ", why);
    }
  }
  ~NcclOp() override { gpu_.GiveEvent(ready_); }
  std::string Describe() const override { return description_; }

  void Run(runtime::Context& context) override {
    AgreeOnCall(context);
    stream_ = gpu_.nccl_stream();
    Check(plugin()->stream_wait_event(stream_, ready_), "stream_wait_event");
    Enqueue(context);
    WaitForStream(context);
  }

 protected:
  virtual ops::Signature Signature() const = 0;
  // Every rank checks the call's signature before any NCCL call. An op whose first
  // step already gathers with this signature skips this round.
  virtual void AgreeOnCall(runtime::Context& context) {
    ops::Signature sig = Signature();
    sig.seq = context.NextSequence();
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
  // Polls the stream so that abort, a dead peer and STARLING_TIMEOUT_SECONDS end the
  // wait: NCCL itself would wait forever for a peer that is gone. The communicator is
  // then aborted (its kernels return) before the error is raised.
  void WaitForStream(runtime::Context& context) {
    void* done = gpu_.TakeEvent();
    struct GiveBack {
      GpuState& gpu;
      void* event;
      ~GiveBack() { gpu.GiveEvent(event); }
    } give_back{gpu_, done};
    Check(plugin()->event_record(done, stream_), "event_record");
    runtime::WaitMonitor monitor(context, label_);
    for (int polls = 0;; ++polls) {
      const int status = plugin()->event_query(done);
      if (status == 0) return;
      if (status != 1) Check(status, "the NCCL stream (event_query)");
      try {
        monitor.CheckAborted();
        if (polls % 64 == 63) monitor.Check([&] { return runtime::Awaited{{}, "the GPU (NCCL)"}; });
      } catch (...) {
        plugin()->nccl_comm_abort(comm());
        throw;
      }
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::string description_;
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

class AllreduceOp : public NcclOp {
 public:
  AllreduceOp(GpuState& gpu, const TensorView& in, const TensorView& out, ReduceOp op, const std::string& name)
      : NcclOp(gpu, ops::DescribeOp("allreduce", name, Str(ReduceOpName(op), ", ", in.Describe(), ", nccl"))),
        in_(in), out_(out), op_(op) {}

 private:
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclAllreduce;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.reduce = static_cast<uint8_t>(op_);
    return sig;
  }

  void Enqueue(runtime::Context& context) override {
    const size_t n = in_.numel;
    if (n == 0) return;
    const ReduceOp nccl_op = op_ == ReduceOp::kAverage ? ReduceOp::kSum : op_;
    const DType wide = Widened(in_.dtype);
    void* result = out_.data;
    PooledBuffer scratch;
    if (wide != in_.dtype) {
      scratch = gpu_.TakeDevice(n * DTypeSize(wide));
      result = scratch.data();
      Check(plugin()->convert(result, static_cast<int>(wide), in_.data, static_cast<int>(in_.dtype), n, stream_),
            "convert");
    }
    const void* send = wide != in_.dtype ? result : in_.data;
    Check(plugin()->nccl_all_reduce(send, result, n, static_cast<int>(wide), static_cast<int>(nccl_op), comm(),
                                    stream_),
          "ncclAllReduce");
    if (op_ == ReduceOp::kAverage)
      Check(plugin()->divide(result, n, static_cast<int>(wide), context.size(), stream_), "divide");
    if (wide != in_.dtype)
      Check(plugin()->convert(out_.data, static_cast<int>(in_.dtype), result, static_cast<int>(wide), n, stream_),
            "convert");
    // The scratch is reused only after this op's stream work is done: the op waits for
    // the stream before it returns (and with it the buffer).
    scratch_ = std::move(scratch);
  }

  TensorView in_, out_;
  ReduceOp op_;
  PooledBuffer scratch_;
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

  // The gather below checks the signature too: one round instead of two.
  void AgreeOnCall(runtime::Context&) override {}

  // A gather of every rank's first dimension, trailing shape and output size, which is
  // also the call's agreement (before any NCCL call).
  void Enqueue(runtime::Context& context) override {
    const int size = context.size(), rank = context.rank();
    Row mine{in_.first_dim(), out_.ndim() == std::max(in_.ndim(), 1) ? out_.first_dim() : -1, TrailingShapeHash(in_), 0};
    ops::Signature sig = Signature();
    sig.seq = context.NextSequence();
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
    const size_t row_bytes = in_.row_bytes();
    if (equal) {
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
};

class NeighborAllreduceOp : public NcclOp {
 public:
  NeighborAllreduceOp(GpuState& gpu, const TensorView& in, const TensorView& out,
                      std::shared_ptr<const ops::NeighborPlan> plan, const std::string& name)
      : NcclOp(gpu, ops::DescribeOp("neighbor_allreduce", name,
                                    Str(in.Describe(), plan->dynamic ? ", dynamic" : "", ", nccl"))),
        in_(in), out_(out), plan_(std::move(plan)) {}

 private:
  ops::Signature Signature() const override {
    ops::Signature sig;
    sig.kind = OpKind::kNcclNeighborAllreduce;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    return sig;
  }

  void Enqueue(runtime::Context& context) override {
    const ops::NeighborPlan& plan = *plan_;
    if (plan.check) ops::CheckSendRecvMatch(context, plan.send_ranks, plan.recv_ranks, context.NextSequence(), Label());
    const size_t n = in_.numel, bytes = in_.bytes;
    const int dtype = static_cast<int>(in_.dtype);
    // What each destination gets: the tensor, or a copy scaled by its weight.
    std::vector<const void*> sends;
    for (double w : plan.send_weights) {
      if (w == 1.0 || n == 0) {
        sends.push_back(in_.data);
        continue;
      }
      scratch_.push_back(gpu_.TakeDevice(bytes));
      Check(plugin()->weighted_sum(scratch_.back().data(), in_.data, w, nullptr, nullptr, 0, n, dtype, stream_),
            "weighted_sum");
      sends.push_back(scratch_.back().data());
    }
    std::vector<const void*> received;
    for (size_t s = 0; s < plan.recv_ranks.size(); ++s) {
      scratch_.push_back(gpu_.TakeDevice(bytes));
      received.push_back(scratch_.back().data());
    }
    if (bytes > 0) {
      Grouped([&] {
        for (size_t d = 0; d < plan.send_ranks.size(); ++d)
          Check(plugin()->nccl_send(sends[d], bytes, plan.send_ranks[d], comm(), stream_), "ncclSend");
        for (size_t s = 0; s < plan.recv_ranks.size(); ++s)
          Check(plugin()->nccl_recv(const_cast<void*>(received[s]), bytes, plan.recv_ranks[s], comm(), stream_),
                "ncclRecv");
      });
    }
    if (n == 0) return;
    // out = self_weight * in + sum w_s * received_s; uniform: every weight 1 / (k + 1).
    std::vector<const void*> inputs;
    std::vector<double> weights;
    const double uniform = 1.0 / static_cast<double>(received.size() + 1);
    for (size_t s = 0; s < received.size(); ++s) {
      const double w = plan.uniform ? uniform : plan.recv_weights[s];
      if (!plan.uniform && w == 0.0) continue;
      inputs.push_back(received[s]);
      weights.push_back(w);
    }
    double self_weight = plan.uniform ? uniform : plan.self_weight;
    const void* x = in_.data;
    size_t done = 0;
    do {  // STARLING_DEVICE_MAX_INPUTS per kernel; longer sums continue from out
      const int k = static_cast<int>(std::min<size_t>(inputs.size() - done, STARLING_DEVICE_MAX_INPUTS));
      Check(plugin()->weighted_sum(out_.data, x, self_weight, inputs.data() + done, weights.data() + done, k, n, dtype,
                                   stream_),
            "weighted_sum");
      done += static_cast<size_t>(k);
      x = out_.data;
      self_weight = 1.0;
    } while (done < inputs.size());
  }

  TensorView in_, out_;
  std::shared_ptr<const ops::NeighborPlan> plan_;
  std::vector<PooledBuffer> scratch_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakeNcclAllreduce(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               ReduceOp op, std::string name) {
  return std::make_unique<AllreduceOp>(context.Extension<GpuState>(), in, out, op, name);
}

std::unique_ptr<runtime::Op> MakeNcclBroadcast(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               int root, std::string name) {
  return std::make_unique<BroadcastOp>(context.Extension<GpuState>(), in, out, root, name);
}

std::unique_ptr<runtime::Op> MakeNcclAllgather(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               int64_t* first_dims, std::string name) {
  return std::make_unique<AllgatherOp>(context.Extension<GpuState>(), in, out, first_dims, name);
}

std::unique_ptr<runtime::Op> MakeNcclNeighborAllreduce(runtime::Context& context, const TensorView& in,
                                                       const TensorView& out, const ops::NeighborArgs& args) {
  return std::make_unique<NeighborAllreduceOp>(context.Extension<GpuState>(), in, out, ops::PlanFor(context, args),
                                               args.name);
}

}  // namespace starling::device
