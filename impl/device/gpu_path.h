// Choosing a context's GPU path, once, at its first collective operation on CUDA
// tensors (every rank makes that call, in the same order, so the choice can be
// collective): every rank reports its GPU (host and PCI identity) and whether NCCL
// loads; the NCCL path needs every rank on a GPU of its own (NCCL refuses two ranks on
// one GPU) and NCCL everywhere, else the context stays on the staged path. The reason
// is kept for starling_gpu_path. STARLING_GPU_PATH=staged skips NCCL; =nccl makes a
// context that cannot use it fail with the reason.
#pragma once

#include "impl/device/gpu_state.h"
#include "impl/runtime/context.h"

namespace starling::device {

// Makes sure the path is chosen (running the collective choice on the engine if not);
// returns it. Throws what the choice threw (kUnsupported for STARLING_GPU_PATH=nccl
// without NCCL, kMismatch if ranks disagree, ...).
GpuPath EnsurePath(runtime::Context& context, GpuState& gpu);

// Throws Error(kUnsupported) with the reason when STARLING_GPU_PATH=nccl and the
// context is on the staged path.
void RequireWanted(runtime::Context& context, GpuState& gpu);

}  // namespace starling::device
