#include "impl/device/staging.h"

#include <algorithm>

#include "impl/common/error.h"
#include "impl/device/gpu_path.h"
#include "impl/device/gpu_state.h"

namespace starling::device {
namespace {

struct StagedTensor {
  TensorView device_view;  // the caller's memory
  TensorView host_view;    // its pinned copy
  Role role;
  bool alias = false;      // same memory as an earlier arg (in place): it does the copies
  PooledBuffer buffer;     // empty for aliases and empty tensors
};

// Elements [first, first + count) of every tensor, at element host_first of its pinned
// copy (a slot of the ring, see Route), or all of each tensor.
struct Range {
  size_t first = 0;
  size_t count = 0;
  size_t host_first = 0;
  bool whole = true;
};

// Pinned slots a pipelined op cycles through: chunk c is copied in while chunk c-1 is
// reduced and chunk c-2 copied out, so a few chunks of pinned memory serve any size.
constexpr size_t kRingSlots = 4;

class StagedOp : public runtime::Op {
 public:
  StagedOp(GpuState& gpu, std::vector<StagedTensor> tensors, std::vector<std::unique_ptr<runtime::Op>> parts,
           std::vector<Range> ranges, void* ready)
      : gpu_(gpu), tensors_(std::move(tensors)), parts_(std::move(parts)), ranges_(std::move(ranges)), ready_(ready) {
    if (parts_.size() == 1 && !parts_[0]->fusion_key().empty()) key_ = "staged:" + parts_[0]->fusion_key();
  }
  ~StagedOp() override { gpu_.GiveEvent(ready_); }

  std::string Describe() const override {
    return Str(parts_[0]->Describe(), " on cuda:", gpu_.device(), " (staged",
               parts_.size() > 1 ? Str(", ", parts_.size(), " chunks") : std::string(), ")");
  }
  const std::string& fusion_key() const override { return key_; }
  size_t fusion_bytes() const override { return parts_[0]->fusion_bytes(); }

  void Run(runtime::Context& context) override {
    gpu_.BindOwnedThread();
    if (parts_.size() > 1) {
      RunPipelined(context);
    } else {
      RunGroup(context, {this});
    }
  }

  // Fused (or single) ops: copy every member's inputs in, run the CPU ops as one group,
  // copy every member's outputs back.
  void RunGroup(runtime::Context& context, const std::vector<runtime::Op*>& group) override {
    gpu_.BindOwnedThread();
    void* stream = gpu_.copy_stream();
    std::vector<StagedOp*> ops;
    std::vector<runtime::Op*> inner;
    for (runtime::Op* op : group) {
      ops.push_back(static_cast<StagedOp*>(op));
      inner.push_back(ops.back()->parts_[0].get());
    }
    Guard guard(context, ops);
    for (StagedOp* op : ops) op->CopyIn(stream, Range{});
    Sync(stream);
    if (inner.size() == 1) {
      inner[0]->Run(context);
    } else {
      inner[0]->RunGroup(context, inner);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      if (inner[i]->failure) {
        ops[i]->failure = inner[i]->failure;
      } else {
        ops[i]->CopyOut(stream, Range{});
      }
    }
    Sync(stream);
    guard.done = true;
  }

 private:
  // On failure: let queued copies finish before the buffers are reused, and after an
  // abort or a dead peer keep the pinned memory (MPI may still write it).
  struct Guard {
    Guard(runtime::Context& c, std::vector<StagedOp*> o) : context(c), ops(std::move(o)) {}
    ~Guard() {
      if (done) return;
      const starling_device_plugin_t& p = *ops[0]->gpu_.plugin();
      p.stream_synchronize(ops[0]->gpu_.copy_stream());
      p.stream_synchronize(ops[0]->gpu_.copy_back_stream());
      if (context.local_teardown())
        for (StagedOp* op : ops)
          for (StagedTensor& t : op->tensors_) t.buffer.Abandon();
    }
    runtime::Context& context;
    std::vector<StagedOp*> ops;
    bool done = false;
  };

  // Chunk c is copied in (copy stream) while chunk c-1 travels and chunk c-2 is copied
  // out (copy-back stream), through kRingSlots pinned slots: chunk c reuses the slot of
  // chunk c - kRingSlots once that chunk's copy out is done (an event the copy stream
  // waits for). The CPU op waits for its own chunk's event only.
  void RunPipelined(runtime::Context& context) {
    void* in = gpu_.copy_stream();
    void* out = gpu_.copy_back_stream();
    Guard guard(context, {this});
    const Plugin& plugin = gpu_.plugin();
    const size_t n = parts_.size();
    std::vector<void*> copied_in(n, nullptr), copied_out(n, nullptr);
    struct Events {
      GpuState& gpu;
      std::vector<void*>& a;
      std::vector<void*>& b;
      ~Events() {
        for (void* e : a) gpu.GiveEvent(e);
        for (void* e : b) gpu.GiveEvent(e);
      }
    } give_back{gpu_, copied_in, copied_out};
    auto record = [&](std::vector<void*>& events, size_t c, void* stream) {
      events[c] = gpu_.TakeEvent();
      plugin.Check(plugin->event_record(events[c], stream), "event_record");
    };
    auto copy_in = [&](size_t c) {
      if (c >= kRingSlots)
        plugin.Check(plugin->stream_wait_event(in, copied_out[c - kRingSlots]), "stream_wait_event");
      CopyIn(in, ranges_[c]);
      record(copied_in, c, in);
    };
    // Copies out overwrite the caller's memory: after its queued work, as copies in.
    plugin.Check(plugin->stream_wait_event(out, ready_), "stream_wait_event");
    for (size_t c = 0; c < std::min(n, kRingSlots); ++c) copy_in(c);
    for (size_t c = 0; c < n; ++c) {
      plugin.Check(plugin->event_synchronize(copied_in[c]), "event_synchronize");
      parts_[c]->Run(context);
      CopyOut(out, ranges_[c]);
      record(copied_out, c, out);
      if (c + kRingSlots < n) copy_in(c + kRingSlots);
    }
    Sync(in);
    Sync(out);
    guard.done = true;
  }

  void CopyIn(void* stream, const Range& range) {
    const Plugin& plugin = gpu_.plugin();
    if (range.whole || range.first == 0) plugin.Check(plugin->stream_wait_event(stream, ready_), "stream_wait_event");
    for (StagedTensor& t : tensors_)
      if (!t.alias && t.role != Role::kOut) Copy(stream, t, false, range);
  }

  void CopyOut(void* stream, const Range& range) {
    for (StagedTensor& t : tensors_)
      if (!t.alias && t.role != Role::kIn) Copy(stream, t, true, range);
  }

  // Copies range between a tensor's device memory and its pinned copy (to_device: which way).
  void Copy(void* stream, const StagedTensor& t, bool to_device, const Range& range) {
    const size_t elem = DTypeSize(t.device_view.dtype);
    const size_t bytes = range.whole ? t.device_view.bytes : range.count * elem;
    if (bytes == 0) return;
    char* device = static_cast<char*>(t.device_view.data) + (range.whole ? 0 : range.first * elem);
    char* host = static_cast<char*>(t.host_view.data) + (range.whole ? 0 : range.host_first * elem);
    gpu_.plugin().Check(gpu_.plugin()->memcpy_async(to_device ? device : host, to_device ? host : device, bytes,
                                                    stream),
                        "memcpy_async");
    gpu_.staged_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }

  void Sync(void* stream) { gpu_.plugin().Check(gpu_.plugin()->stream_synchronize(stream), "stream_synchronize"); }

  GpuState& gpu_;
  std::vector<StagedTensor> tensors_;
  std::vector<std::unique_ptr<runtime::Op>> parts_;
  std::vector<Range> ranges_;
  void* ready_;
  std::string key_;
};

TensorView Slice(const TensorView& view, size_t first, size_t count) {
  TensorView s = view;
  s.data = static_cast<char*>(view.data) + first * DTypeSize(view.dtype);
  s.shape = {static_cast<int64_t>(count)};
  s.numel = count;
  s.bytes = count * DTypeSize(view.dtype);
  return s;
}

// inner's bytes lie within outer's (both non-empty).
bool Within(const TensorView& inner, const TensorView& outer) {
  const auto a = reinterpret_cast<uintptr_t>(outer.data), b = reinterpret_cast<uintptr_t>(inner.data);
  return inner.bytes > 0 && outer.bytes > 0 && a <= b && b + inner.bytes <= a + outer.bytes;
}

bool SameElements(const std::vector<TensorArg>& args) {
  for (const TensorArg& a : args)
    if (a.view.dtype != args[0].view.dtype || a.view.numel != args[0].view.numel) return false;
  return true;
}

}  // namespace

bool AnyOnDevice(const std::vector<TensorArg>& args) {
  const TensorArg* device = nullptr;
  const TensorArg* host = nullptr;
  for (const TensorArg& a : args) {
    if (a.view.on_device()) {
      if (!device) device = &a;
    } else if (!host) {
      host = &a;
    }
  }
  if (device && host)
    Fail(Code::kInvalidArgument, device->name, " is on cuda:", device->view.device, " but ", host->name,
         " is host memory; pass every tensor of one call on the same device");
  return device != nullptr;
}

std::unique_ptr<runtime::Op> Route(runtime::Context& context, const std::vector<TensorArg>& args,
                                   const RouteOptions& options, const MakeOp& make) {
  if (!AnyOnDevice(args)) {
    std::vector<TensorView> views;
    for (const TensorArg& a : args) views.push_back(a.view);
    return make(views);
  }
  GpuState& gpu = context.Extension<GpuState>();
  for (const TensorArg& a : args) gpu.Admit(a.view, a.name);
  // Staging gives every tensor its own host copy, so overlaps must be caught here.
  const bool inner = options.out_within_in && args.size() >= 2 && Within(args[1].view, args[0].view);
  for (size_t i = 0; i < args.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!(inner && i == 1 && j == 0)) CheckInOut(args[j].view, args[i].view, args[j].name, args[i].name);

  const GpuPath path = options.collective ? EnsurePath(context, gpu) : gpu.path();
  if (path == GpuPath::kNccl && options.nccl) {
    std::vector<TensorView> views;
    for (const TensorArg& a : args) views.push_back(a.view);
    make(views);  // the CPU op's checks, identical on every path; the op is discarded
    return options.nccl(views);
  }

  // Large element-wise ops go in chunks through a ring of pinned slots (RunPipelined);
  // the others get a pinned copy of each whole tensor.
  const size_t elem = DTypeSize(args[0].view.dtype);
  const size_t chunk = std::max<size_t>(1, context.config().gpu_chunk_bytes / elem);
  const size_t numel = args[0].view.numel;
  const bool pipelined = options.elementwise && SameElements(args) && numel > chunk;
  const size_t ring = std::min(numel, kRingSlots * chunk);  // elements of pinned memory per tensor

  std::vector<StagedTensor> tensors;
  std::vector<TensorView> host_views;
  for (const TensorArg& a : args) {
    StagedTensor t{a.view, a.view, a.role, false, PooledBuffer()};
    t.host_view.device = -1;
    auto primary = std::find_if(tensors.begin(), tensors.end(), [&](const StagedTensor& o) {
      return !o.alias && a.view.bytes > 0 && o.device_view.data == a.view.data;
    });
    if (a.view.bytes == 0 || a.role == Role::kShape) {
      t.alias = true;  // nothing to copy; the CPU op never reads through this pointer
    } else if (inner && tensors.size() == 1 && a.view.bytes != tensors[0].device_view.bytes) {
      // Inside the first tensor's pinned copy, which brings its data in; it copies out
      // its own range only.
      t.host_view.data = static_cast<char*>(tensors[0].host_view.data) +
                         (static_cast<const char*>(a.view.data) - static_cast<const char*>(args[0].view.data));
    } else if (primary != tensors.end()) {  // in place: one pinned copy, in and out
      STARLING_CHECK_ARG(primary->device_view.bytes == a.view.bytes, a.name, " starts where ",
                         args[primary - tensors.begin()].name, " starts but has another size; pass the same "
                         "tensor (in place) or separate memory");
      t.alias = true;
      t.host_view.data = primary->host_view.data;
      if (primary->role != a.role) primary->role = Role::kInOut;
    } else {
      t.buffer = gpu.TakePinned(pipelined ? ring * elem : a.view.bytes);
      t.host_view.data = t.buffer.data();
    }
    host_views.push_back(t.host_view);
    tensors.push_back(std::move(t));
  }

  std::vector<std::unique_ptr<runtime::Op>> parts;
  std::vector<Range> ranges;
  if (pipelined) {
    for (size_t first = 0, c = 0; first < numel; first += chunk, ++c) {
      const size_t count = std::min(chunk, numel - first);
      const size_t slot_first = c % kRingSlots * chunk;
      std::vector<TensorView> views;
      for (const TensorView& v : host_views) views.push_back(Slice(v, slot_first, count));
      parts.push_back(make(views));
      ranges.push_back(Range{first, count, slot_first, false});
    }
  } else {
    parts.push_back(make(host_views));
  }
  void* ready = gpu.RecordCallerStream();
  return std::make_unique<StagedOp>(gpu, std::move(tensors), std::move(parts), std::move(ranges), ready);
}

}  // namespace starling::device
