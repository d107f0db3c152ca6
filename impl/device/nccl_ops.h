// The NCCL path's operations: the data moves between GPUs by NCCL on the context's
// NCCL stream, after the work queued on the caller's stream; the context's MPI only
// carries a small agreement first (the operation's kind, dtype and size, checked on
// every rank, so ranks that disagree get a clear MISMATCH instead of a hang or
// corrupted data). The calls return when the results are in device memory.
//
// allreduce:  ncclAllReduce; float16/bfloat16 reduced in float32 and int16 in int32
//             (converted by our kernels, as on the CPU path); AVERAGE sums and divides.
// broadcast:  ncclBroadcast.
// allgather:  first dimensions agreed over MPI, then ncclAllGather (equal dimensions)
//             or grouped ncclSend/ncclRecv (varying ones).
// neighbor_allreduce (static, weighted, dynamic with destination weights): grouped
//             ncclSend/ncclRecv to and from the neighbors, destination weights applied
//             by the sender, the weighted combine in our kernel.
// Validation happens before (device::Route builds the CPU op first, which checks the
// arguments exactly as on the other paths).
#pragma once

#include <memory>
#include <string>

#include "impl/common/dtype.h"
#include "impl/common/tensor.h"
#include "impl/ops/neighbor_plan.h"
#include "impl/runtime/context.h"
#include "impl/runtime/op.h"

namespace starling::device {

std::unique_ptr<runtime::Op> MakeNcclAllreduce(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               ReduceOp op, std::string name);
std::unique_ptr<runtime::Op> MakeNcclBroadcast(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               int root, std::string name);
std::unique_ptr<runtime::Op> MakeNcclAllgather(runtime::Context& context, const TensorView& in, const TensorView& out,
                                               int64_t* first_dims, std::string name);
std::unique_ptr<runtime::Op> MakeNcclNeighborAllreduce(runtime::Context& context, const TensorView& in,
                                                       const TensorView& out, const ops::NeighborArgs& args);

}  // namespace starling::device
