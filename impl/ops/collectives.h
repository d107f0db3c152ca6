// The classic collectives as engine operations. Each Make* validates its arguments on
// the caller's thread (throwing Error) and returns an Op to submit or execute.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

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

// The algorithms themselves, for operations composed of several steps (hierarchical
// averaging). `sig` carries the kind and sequence number; the rest is filled in.
void RunAllreduce(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                  ReduceOp op, Signature sig, const LazyText& what);
// root_index: the root's position in the group.
void RunBroadcast(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                  int root_index, Signature sig, const LazyText& what);

// "allreduce 'name' (...)": shared formatting of op descriptions.
std::string DescribeOp(const char* kind, const std::string& name, const std::string& details);

}  // namespace starling::ops
