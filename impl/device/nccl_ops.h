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
// reduce_scatter: ncclReduceScatter (equal blocks; widened and divided as allreduce), or,
//             for blocks of different sizes and floating MIN/MAX, grouped ncclSend/ncclRecv
//             of each rank's part and our reduce kernel in rank order.
// alltoall:   grouped ncclSend/ncclRecv straight between the tensors; per-rank counts
//             gathered and checked over MPI first, as on the CPU path.
// neighbor_allreduce (static, weighted, dynamic with destination weights): grouped
//             ncclSend/ncclRecv to and from the neighbors, destination weights applied
//             by the sender, the weighted combine in our kernel.
// neighbor_allgather: the sources' first dimensions gathered over MPI, then grouped
//             ncclSend/ncclRecv straight into out.
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
// counts / send_counts / recv_counts: as the CPU ops take them (already validated).
std::unique_ptr<runtime::Op> MakeNcclReduceScatter(runtime::Context& context, const TensorView& in,
                                                   const TensorView& out, const int64_t* counts, ReduceOp op,
                                                   std::string name);
std::unique_ptr<runtime::Op> MakeNcclAlltoall(runtime::Context& context, const TensorView& in, const TensorView& out,
                                              const int64_t* send_counts, const int64_t* recv_counts,
                                              std::string name);
std::unique_ptr<runtime::Op> MakeNcclNeighborAllgather(runtime::Context& context, const TensorView& in,
                                                       const TensorView& out, int64_t* first_dims,
                                                       const ops::NeighborArgs& args);
std::unique_ptr<runtime::Op> MakeNcclNeighborAllreduce(runtime::Context& context, const TensorView& in,
                                                       const TensorView& out, const ops::NeighborArgs& args);

}  // namespace starling::device
