// Classic collectives: glue only (validation lives in impl/ops).
#include "capi/private/launch.h"
#include "impl/device/nccl_ops.h"
#include "impl/device/staging.h"
#include "impl/ops/collectives.h"

using namespace starling;
using namespace starling::capi;

namespace {

starling_status_t Allreduce(starling_context_t ctx, const DLTensor* in, DLTensor* out, const starling_reduce_op_t& op,
                            const char* name, starling_request_t* req, bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    const ReduceOp reduce = ToReduceOp(op);
    device::RouteOptions route{true, true, [&](const Views& v) {
                                 return device::MakeNcclAllreduce(c, v[0], v[1], reduce, NameOf(name));
                               }};
    return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
      return ops::MakeAllreduce(c, v[0], v[1], reduce, NameOf(name));
    });
  });
}

starling_status_t Broadcast(starling_context_t ctx, const DLTensor* in, DLTensor* out, int root, const char* name,
                            starling_request_t* req, bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    device::RouteOptions route{true, true, [&](const Views& v) {
                                 return device::MakeNcclBroadcast(c, v[0], v[1], root, NameOf(name));
                               }};
    // Staging moves only what the broadcast reads and writes: `in` at the root (whose
    // `out` is unchanged when in place), `out` elsewhere.
    device::TensorArg source = In(in), target = Out(out);
    if (c.rank() != root) source.role = device::Role::kShape;
    else if (in != nullptr && out != nullptr && source.view.data == target.view.data) target.role = device::Role::kIn;
    return device::Route(c, {source, target}, route, [&](const Views& v) {
      return ops::MakeBroadcast(c, v[0], v[1], root, NameOf(name));
    });
  });
}

starling_status_t Allgather(starling_context_t ctx, const DLTensor* in, DLTensor* out, int64_t* first_dims,
                            const char* name, starling_request_t* req, bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    device::RouteOptions route{false, true, [&](const Views& v) {
                                 return device::MakeNcclAllgather(c, v[0], v[1], first_dims, NameOf(name));
                               }};
    return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
      return ops::MakeAllgather(c, v[0], v[1], first_dims, NameOf(name));
    });
  });
}

starling_status_t AllgatherFirstDims(starling_context_t ctx, const DLTensor* in, int64_t* first_dims,
                                     const char* name, starling_request_t* req, bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    return device::Route(c, {Shape(in)}, device::RouteOptions{false, true, nullptr}, [&](const Views& v) {
      return ops::MakeAllgatherFirstDims(c, v[0], first_dims, NameOf(name));
    });
  });
}

starling_status_t ReduceScatter(starling_context_t ctx, const DLTensor* in, DLTensor* out, const int64_t* counts,
                                const starling_reduce_op_t& op, const char* name, starling_request_t* req,
                                bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    const ReduceOp reduce = ToReduceOp(op);
    device::RouteOptions route{false, true, [&](const Views& v) {
                                 return device::MakeNcclReduceScatter(c, v[0], v[1], counts, reduce, NameOf(name));
                               }};
    route.out_within_in = true;
    return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
      return ops::MakeReduceScatter(c, v[0], v[1], counts, reduce, NameOf(name));
    });
  });
}

starling_status_t Alltoall(starling_context_t ctx, const DLTensor* in, DLTensor* out, const int64_t* send_counts,
                           const int64_t* recv_counts, const char* name, starling_request_t* req, bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    device::RouteOptions route{false, true, [&](const Views& v) {
                                 return device::MakeNcclAlltoall(c, v[0], v[1], send_counts, recv_counts,
                                                                 NameOf(name));
                               }};
    return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
      return ops::MakeAlltoall(c, v[0], v[1], send_counts, recv_counts, NameOf(name));
    });
  });
}

}  // namespace

extern "C" {

STARLING_API starling_status_t starling_allreduce(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                  starling_reduce_op_t op, const char* name) {
  return Allreduce(ctx, in, out, op, name, nullptr, false);
}
STARLING_API starling_status_t starling_allreduce_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                              DLTensor* out, starling_reduce_op_t op,
                                                              const char* name, starling_request_t* req) {
  return Allreduce(ctx, in, out, op, name, req, true);
}

STARLING_API starling_status_t starling_broadcast(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                  int root, const char* name) {
  return Broadcast(ctx, in, out, root, name, nullptr, false);
}
STARLING_API starling_status_t starling_broadcast_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                              DLTensor* out, int root, const char* name,
                                                              starling_request_t* req) {
  return Broadcast(ctx, in, out, root, name, req, true);
}

STARLING_API starling_status_t starling_allgather(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                  int64_t* first_dims, const char* name) {
  return Allgather(ctx, in, out, first_dims, name, nullptr, false);
}
STARLING_API starling_status_t starling_allgather_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                              DLTensor* out, int64_t* first_dims,
                                                              const char* name, starling_request_t* req) {
  return Allgather(ctx, in, out, first_dims, name, req, true);
}

STARLING_API starling_status_t starling_allgather_first_dims(starling_context_t ctx, const DLTensor* in,
                                                             int64_t* first_dims, const char* name) {
  return AllgatherFirstDims(ctx, in, first_dims, name, nullptr, false);
}
STARLING_API starling_status_t starling_allgather_first_dims_nonblocking(starling_context_t ctx,
                                                                         const DLTensor* in,
                                                                         int64_t* first_dims,
                                                                         const char* name,
                                                                         starling_request_t* req) {
  return AllgatherFirstDims(ctx, in, first_dims, name, req, true);
}

STARLING_API starling_status_t starling_reduce_scatter(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                       const int64_t* counts, starling_reduce_op_t op,
                                                       const char* name) {
  return ReduceScatter(ctx, in, out, counts, op, name, nullptr, false);
}
STARLING_API starling_status_t starling_reduce_scatter_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                                   DLTensor* out, const int64_t* counts,
                                                                   starling_reduce_op_t op, const char* name,
                                                                   starling_request_t* req) {
  return ReduceScatter(ctx, in, out, counts, op, name, req, true);
}

STARLING_API starling_status_t starling_alltoall(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                 const int64_t* send_counts, const int64_t* recv_counts,
                                                 const char* name) {
  return Alltoall(ctx, in, out, send_counts, recv_counts, name, nullptr, false);
}
STARLING_API starling_status_t starling_alltoall_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                             DLTensor* out, const int64_t* send_counts,
                                                             const int64_t* recv_counts, const char* name,
                                                             starling_request_t* req) {
  return Alltoall(ctx, in, out, send_counts, recv_counts, name, req, true);
}

STARLING_API starling_status_t starling_barrier(starling_context_t ctx) {
  return Launch(ctx, nullptr, false, [](const runtime::Context& c) { return ops::MakeBarrier(c); });
}
STARLING_API starling_status_t starling_barrier_nonblocking(starling_context_t ctx, starling_request_t* req) {
  return Launch(ctx, req, true, [](const runtime::Context& c) { return ops::MakeBarrier(c); });
}

STARLING_API starling_status_t starling_probe_peers(starling_context_t ctx, const starling_probe_args_t* args,
                                                    double* latency_seconds, double* bytes_per_second,
                                                    int count) {
  return Launch(ctx, nullptr, false, [&](const runtime::Context& c) {
    const starling_probe_args_t defaults = STARLING_PROBE_ARGS_INIT;
    const starling_probe_args_t a =
        CopyOptions(args, defaults, sizeof(starling_probe_args_t), "args", "STARLING_PROBE_ARGS_INIT");
    if (latency_seconds != nullptr || bytes_per_second != nullptr) {
      STARLING_CHECK_ARG(count >= c.size(), "count is ", count, " but the outputs need room for ", c.size(),
                         " values (one per rank)");
    }
    constexpr int kDefaultRepetitions = 5;
    constexpr uint64_t kDefaultBulk = uint64_t{1} << 20;
    return ops::MakeProbePeers(c, a.repetitions == 0 ? kDefaultRepetitions : a.repetitions,
                               a.bulk_bytes == 0 ? kDefaultBulk : a.bulk_bytes, latency_seconds, bytes_per_second);
  });
}

}  // extern "C"
