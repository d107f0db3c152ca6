// The classic collectives as engine operations. Each Make* validates its arguments on
// the caller's thread (throwing Error) and returns an Op to submit or execute.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "impl/common/dtype.h"
#include "impl/common/tensor.h"
#include "impl/ops/group.h"
#include "impl/ops/wire.h"
#include "impl/runtime/context.h"
#include "impl/runtime/op.h"

namespace starling::ops {

std::unique_ptr<runtime::Op> MakeAllreduce(const runtime::Context& context, const TensorView& in,
                                           const TensorView& out, ReduceOp op, std::string name);
// Allreduce among this rank's machine only (BlueFog's is_hierarchical_local).
std::unique_ptr<runtime::Op> MakeLocalAllreduce(const runtime::Context& context, const TensorView& in,
                                                const TensorView& out, ReduceOp op, std::string name);
std::unique_ptr<runtime::Op> MakeBroadcast(const runtime::Context& context, const TensorView& in,
                                           const TensorView& out, int root, std::string name);
// first_dims: NULL or room for size() entries, written when the op runs.
std::unique_ptr<runtime::Op> MakeAllgather(const runtime::Context& context, const TensorView& in,
                                           const TensorView& out, int64_t* first_dims, std::string name);
std::unique_ptr<runtime::Op> MakeAllgatherFirstDims(const runtime::Context& context, const TensorView& in,
                                                    int64_t* first_dims, std::string name);
std::unique_ptr<runtime::Op> MakeBarrier(const runtime::Context& context);
// counts: NULL (equal blocks) or size() block sizes in elements; copied.
std::unique_ptr<runtime::Op> MakeReduceScatter(const runtime::Context& context, const TensorView& in,
                                               const TensorView& out, const int64_t* counts, ReduceOp op,
                                               std::string name);
// A fingerprint of reduce_scatter's block counts, for its signature (every path).
uint32_t HashBlockCounts(const std::vector<int64_t>& counts);
// send_counts / recv_counts: both NULL (equal blocks) or size() entries each; copied.
std::unique_ptr<runtime::Op> MakeAlltoall(const runtime::Context& context, const TensorView& in,
                                          const TensorView& out, const int64_t* send_counts,
                                          const int64_t* recv_counts, std::string name);
// Alltoall with per-rank counts: gathers every member's send and receive counts by
// dissemination (which is also the call's agreement under `sig`) and checks every pair,
// so a count one rank sends but its peer does not expect fails on every member, naming
// both (`what` opens the message). Used by the CPU and NCCL paths alike.
void AgreeOnAlltoallCounts(runtime::Context& context, const Group& group, const Signature& sig,
                           const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
                           const std::string& what, const LazyText& label);
// starling_probe_peers: latency and throughput to every rank, written by rank into
// latency / throughput (each NULL or room for size() entries) and kept in the peer stats.
std::unique_ptr<runtime::Op> MakeProbePeers(const runtime::Context& context, int repetitions, uint64_t bulk_bytes,
                                            double* latency, double* throughput);
// The collective half of starling_context_split: agrees on the call, then splits the
// context's communicator into *out (MPI_COMM_NULL for color < 0; the caller frees it).
std::unique_ptr<runtime::Op> MakeContextSplit(const runtime::Context& context, int color, int key, MPI_Comm* out);
// The first step of starling_context_grow and _shrink (kind kContextGrow or
// kContextShrink): every rank agrees that it makes this call with this count, so that a
// rank making another call meanwhile gets MISMATCH instead of a hang in the resize's
// own MPI collectives.
std::unique_ptr<runtime::Op> MakeResizeAgreement(OpKind kind, int count);

// The algorithms themselves, for operations composed of several steps (hierarchical
// averaging). `sig` carries the kind and sequence number; the rest is filled in.
void RunAllreduce(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                  ReduceOp op, Signature sig, const LazyText& what);
// root_index: the root's position in the group.
void RunBroadcast(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                  int root_index, Signature sig, const LazyText& what);

// The reduction ops allreduce and reduce_scatter take (AVERAGE on floating dtypes only).
void CheckReduceOp(ReduceOp op, DType dtype);

// "allreduce 'name' (...)": shared formatting of op descriptions.
std::string DescribeOp(const char* kind, const std::string& name, const std::string& details);

}  // namespace starling::ops
