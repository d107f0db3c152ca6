// Operations on CUDA tensors. Route() is called by every entry point with the op's
// tensors: host tensors go straight to the CPU op; CUDA tensors are checked (plugin
// loaded, pointers really device memory of the context's GPU, no mixing of host and
// device) and the op runs on the staged path: pinned host copies of the tensors, the
// very same CPU op on them, and copies back, on the engine's copy stream. Large
// element-wise ops are pipelined: chunk k travels while chunk k+1 is copied in and
// chunk k-1 copied out.
//
// Stream contract (DLPack's): the copies start after the work queued on the caller's
// stream (starling_set_cuda_stream) when the call was made (an event recorded then), and
// the op completes only when its results are in device memory, so a blocking call's
// result, or a completed request's, is ready for every stream. The caller's stream is
// never synchronized, nor is the device.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "impl/common/tensor.h"
#include "impl/runtime/context.h"
#include "impl/runtime/op.h"

namespace starling::device {

// kShape: the op reads only the tensor's shape (no copies; its data is never touched).
enum class Role { kIn, kOut, kInOut, kShape };

struct TensorArg {
  TensorView view;
  Role role;
  const char* name;
};

// Builds the CPU op over the given views (same order as the args).
using MakeOp = std::function<std::unique_ptr<runtime::Op>(const std::vector<TensorView>& views)>;

struct RouteOptions {
  // Every arg has the same dtype and element count and the op works element by element,
  // so it may be built and run once per chunk of STARLING_GPU_CHUNK_BYTES (each chunk a
  // 1-D tensor) for pipelining.
  bool elementwise = false;
  // Every rank of the context makes this call: it may choose the context's GPU path
  // (impl/device/gpu_path.h) if that is not done yet.
  bool collective = false;
  // The op on the NCCL path (empty: the op always takes the staged path). Called with
  // the device views after `make` validated them.
  MakeOp nccl;
  // The second arg may lie inside the first (reduce_scatter in place: out is this rank's
  // block of in, which the CPU op checks); its pinned copy is then that part of the
  // first's, copied in with it.
  bool out_within_in = false;
};

std::unique_ptr<runtime::Op> Route(runtime::Context& context, const std::vector<TensorArg>& args,
                                   const RouteOptions& options, const MakeOp& make);

// True if any of the views is CUDA memory (after checking they are not mixed).
bool AnyOnDevice(const std::vector<TensorArg>& args);

}  // namespace starling::device
