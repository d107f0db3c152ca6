// Compressed operations on a context's engine: allreduce (gather of compressed
// tensors, float64 sum in rank order) and CHOCO-gossip neighbor averaging. Make*
// validate on the caller's thread and throw Error.
#pragma once

#include <memory>
#include <string>

#include "impl/common/tensor.h"
#include "impl/compress/codec.h"
#include "impl/ops/neighbor_plan.h"
#include "impl/runtime/context.h"
#include "impl/runtime/op.h"

namespace starling::compress {

std::unique_ptr<runtime::Op> MakeCompressedAllreduce(runtime::Context& context, const TensorView& in,
                                                     const TensorView& out, ReduceOp op, std::string name,
                                                     const Spec& spec);
std::unique_ptr<runtime::Op> MakeChocoNeighborAllreduce(runtime::Context& context, const TensorView& in,
                                                        const TensorView& out, const ops::NeighborArgs& args,
                                                        const Spec& spec);
// Drops the state of `name` (all names when `all`) once earlier operations ran.
std::unique_ptr<runtime::Op> MakeCompressionReset(std::string name, bool all);

// Throws kInvalidArgument naming a bad field (k < 0, ratio, gamma, kind).
void CheckSpec(const Spec& spec);

}  // namespace starling::compress
