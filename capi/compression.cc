// Compressed allreduce and neighbor averaging, and their state: glue only (the
// operations live in impl/compress).
#include <cstddef>

#include "capi/private/launch.h"
#include "impl/device/nccl_ops.h"
#include "impl/compress/ops.h"
#include "impl/ops/collectives.h"
#include "impl/ops/neighbor.h"

using namespace starling;
using namespace starling::capi;

namespace starling::capi {
// neighbor.cc's parser of starling_neighbor_args_t.
ops::NeighborArgs ParseNeighborArgs(const starling_neighbor_args_t* args);
}  // namespace starling::capi

namespace {

compress::Spec ParseCompression(const starling_compression_t* c) {
  const starling_compression_t a =
      CopyOptions(c, starling_compression_t STARLING_COMPRESSION_INIT, offsetof(starling_compression_t, gamma) + sizeof(double),
                  "compression", "STARLING_COMPRESSION_INIT");
  STARLING_CHECK_ARG(a.compressor >= STARLING_COMPRESS_NONE && a.compressor <= STARLING_COMPRESS_SIGN,
                     "compression->compressor is ", a.compressor,
                     ", not one of STARLING_COMPRESS_NONE ... STARLING_COMPRESS_SIGN");
  STARLING_CHECK_ARG(a.error_feedback == 0 || a.error_feedback == 1, "compression->error_feedback must be 0 or 1, got ",
                     a.error_feedback);
  compress::Spec spec;
  spec.kind = static_cast<compress::Kind>(a.compressor);
  spec.k = a.k;
  spec.ratio = a.ratio;
  spec.seed = a.seed;
  spec.error_feedback = a.error_feedback == 1;
  spec.gamma = a.gamma;
  compress::CheckSpec(spec);
  return spec;
}

starling_status_t AllreduceCompressed(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                      const starling_reduce_op_t& op, const char* name,
                                      const starling_compression_t* compression, starling_request_t* req,
                                      bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    const ReduceOp reduce = ToReduceOp(op);
    const compress::Spec spec = ParseCompression(compression);
    if (spec.kind == compress::Kind::kNone) {
      device::RouteOptions route{true, true, [&](const Views& v) {
                                   return device::MakeNcclAllreduce(c, v[0], v[1], reduce, NameOf(name));
                                 }};
      return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
        return ops::MakeAllreduce(c, v[0], v[1], reduce, NameOf(name));
      });
    }
    // Not element-wise (per-tensor state and selection): CUDA tensors are staged whole.
    return device::Route(c, {In(in), Out(out)}, device::RouteOptions{false, true, nullptr}, [&](const Views& v) {
      return compress::MakeCompressedAllreduce(c, v[0], v[1], reduce, NameOf(name), spec);
    });
  });
}

starling_status_t NeighborAllreduceCompressed(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                              const starling_neighbor_args_t* args,
                                              const starling_compression_t* compression, starling_request_t* req,
                                              bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    const ops::NeighborArgs parsed = ParseNeighborArgs(args);
    const compress::Spec spec = ParseCompression(compression);
    if (spec.kind == compress::Kind::kNone) {
      device::RouteOptions route{true, true, [&](const Views& v) {
                                   return device::MakeNcclNeighborAllreduce(c, v[0], v[1], parsed);
                                 }};
      return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
        return ops::MakeNeighborAllreduce(c, v[0], v[1], parsed);
      });
    }
    return device::Route(c, {In(in), Out(out)}, device::RouteOptions{false, true, nullptr}, [&](const Views& v) {
      return compress::MakeChocoNeighborAllreduce(c, v[0], v[1], parsed, spec);
    });
  });
}

}  // namespace

extern "C" {

STARLING_API starling_status_t starling_allreduce_compressed(starling_context_t ctx, const DLTensor* in,
                                                             DLTensor* out, starling_reduce_op_t op,
                                                             const char* name,
                                                             const starling_compression_t* compression) {
  return AllreduceCompressed(ctx, in, out, op, name, compression, nullptr, false);
}
STARLING_API starling_status_t starling_allreduce_compressed_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, starling_reduce_op_t op, const char* name,
    const starling_compression_t* compression, starling_request_t* req) {
  return AllreduceCompressed(ctx, in, out, op, name, compression, req, true);
}

STARLING_API starling_status_t starling_neighbor_allreduce_compressed(starling_context_t ctx, const DLTensor* in,
                                                                      DLTensor* out,
                                                                      const starling_neighbor_args_t* args,
                                                                      const starling_compression_t* compression) {
  return NeighborAllreduceCompressed(ctx, in, out, args, compression, nullptr, false);
}
STARLING_API starling_status_t starling_neighbor_allreduce_compressed_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, const starling_neighbor_args_t* args,
    const starling_compression_t* compression, starling_request_t* req) {
  return NeighborAllreduceCompressed(ctx, in, out, args, compression, req, true);
}

STARLING_API starling_status_t starling_compression_reset(starling_context_t ctx, const char* name) {
  return Launch(ctx, nullptr, false, [&](runtime::Context&) {
    return compress::MakeCompressionReset(NameOf(name), name == nullptr);
  });
}

}  // extern "C"
