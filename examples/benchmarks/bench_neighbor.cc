// neighbor_allreduce against the raw MPI code for the same data movement: MPI_Irecv
// from each in-neighbor, MPI_Isend to each out-neighbor, MPI_Waitall, then the same
// average in one vectorizable pass. Also fusion: 100 queued 4 KiB calls against 100
// calls each waited on.
#include <algorithm>
#include <memory>

#include "bench_context.h"

namespace bench {

void Combine(float* __restrict out, const float* __restrict x, const std::vector<float*>& r, float self, float w,
             size_t n) {
  switch (r.size()) {
    case 0:
      for (size_t i = 0; i < n; ++i) out[i] = self * x[i];
      break;
    case 1: {
      const float* __restrict r0 = r[0];
      for (size_t i = 0; i < n; ++i) out[i] = self * x[i] + w * r0[i];
      break;
    }
    case 2: {
      const float* __restrict r0 = r[0];
      const float* __restrict r1 = r[1];
      for (size_t i = 0; i < n; ++i) out[i] = self * x[i] + w * r0[i] + w * r1[i];
      break;
    }
    default:
      for (size_t i = 0; i < n; ++i) {
        float s = self * x[i];
        for (const float* rj : r) s += w * rj[i];
        out[i] = s;
      }
  }
}

Peers StaticPeers(starling_context_t ctx) {
  Peers p;
  int count = 0;
  starling_in_neighbors(ctx, nullptr, 0, &count);
  p.recv.resize(count);
  if (count) Check(starling_in_neighbors(ctx, p.recv.data(), count, &count), "in_neighbors");
  starling_out_neighbors(ctx, nullptr, 0, &count);
  p.send.resize(count);
  if (count) Check(starling_out_neighbors(ctx, p.send.data(), count, &count), "out_neighbors");
  return p;
}

namespace {

Peers Next(starling_schedule_t schedule, int size) {
  Peers p;
  p.send.resize(static_cast<size_t>(size));
  p.recv.resize(static_cast<size_t>(size));
  int ns = 0, nr = 0;
  Check(starling_schedule_next(schedule, p.send.data(), size, &ns, p.recv.data(), size, &nr), "schedule_next");
  p.send.resize(static_cast<size_t>(ns));
  p.recv.resize(static_cast<size_t>(nr));
  return p;
}

}  // namespace

// One raw-MPI neighbor average of x into out over `peers`, receiving into `scratch`.
void RawNeighborAverage(const Peers& peers, float* x, float* out, std::vector<std::vector<float>>& scratch, int count,
                        bool uniform) {
  std::vector<MPI_Request> reqs;
  std::vector<float*> r;
  for (size_t j = 0; j < peers.recv.size(); ++j) {
    reqs.emplace_back();
    MPI_Irecv(scratch[j].data(), count, MPI_FLOAT, peers.recv[j], 7, MPI_COMM_WORLD, &reqs.back());
    r.push_back(scratch[j].data());
  }
  for (int dst : peers.send) {
    reqs.emplace_back();
    MPI_Isend(x, count, MPI_FLOAT, dst, 7, MPI_COMM_WORLD, &reqs.back());
  }
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  const float w = uniform ? 1.0f / (r.size() + 1) : 0.5f;
  Combine(out, x, r, w, w, static_cast<size_t>(count));
}

std::vector<Row> RunNeighbor(BenchContext& b, const std::string& variant, const std::vector<size_t>& sizes) {
  starling_topology_t topo;
  if (variant == "ring") {
    Check(starling_topology_ring(b.size, STARLING_RING_BIDIRECTIONAL, &topo), "ring");
  } else {
    Check(starling_topology_exponential_two(b.size, &topo), "exp2");
  }
  Check(starling_set_topology(b.ctx, topo, 0), "set_topology");
  const bool dynamic = variant == "dynamic";
  std::vector<Row> rows;
  if (dynamic && b.size < 2) {
    starling_topology_free(topo);
    return rows;
  }
  const Peers fixed = StaticPeers(b.ctx);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(b.size), std::vector<float>(b.a.size()));
  for (size_t bytes : sizes) {
    int64_t n = static_cast<int64_t>(bytes / 4);
    const int count = static_cast<int>(n);
    DLTensor in = Tensor(b.a.data(), &n), out = Tensor(b.b.data(), &n);
    starling_schedule_t raw_schedule = nullptr, our_schedule = nullptr;
    if (dynamic) {
      Check(starling_schedule_dynamic_one_peer(topo, b.rank, &raw_schedule), "schedule");
      Check(starling_schedule_dynamic_one_peer(topo, b.rank, &our_schedule), "schedule");
    }
    auto raw = [&] {
      RawNeighborAverage(dynamic ? Next(raw_schedule, b.size) : fixed, b.a.data(), b.b.data(), scratch, count,
                         !dynamic);
    };
    auto ours = [&] {
      if (!dynamic) {
        Check(starling_neighbor_allreduce(b.ctx, &in, &out, nullptr), "neighbor_allreduce");
        return;
      }
      const Peers step = Next(our_schedule, b.size);
      std::vector<double> weights(step.recv.size(), 0.5);
      starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
      args.dynamic = 1;
      args.use_weights = 1;
      args.self_weight = 0.5;
      args.num_sources = static_cast<int>(step.recv.size());
      args.source_ranks = step.recv.data();
      args.source_weights = weights.data();
      args.num_destinations = static_cast<int>(step.send.size());
      args.destination_ranks = step.send.data();
      Check(starling_neighbor_allreduce(b.ctx, &in, &out, &args), "neighbor_allreduce");
    };
    rows.push_back({"neighbor_allreduce", dynamic ? "one-peer exp2" : variant, b.size, bytes,
                    Compare(raw, ours, b.budget)});
    if (raw_schedule) starling_schedule_free(raw_schedule);
    if (our_schedule) starling_schedule_free(our_schedule);
    Progress("neighbor_allreduce " + variant, bytes);
  }
  starling_topology_free(topo);
  return rows;
}

std::vector<Row> RunFusion(BenchContext& b) {
  constexpr int kTensors = 100;
  constexpr int64_t kFloats = 1024;  // 4 KiB
  starling_topology_t topo;
  Check(starling_topology_exponential_two(b.size, &topo), "exp2");
  Check(starling_set_topology(b.ctx, topo, 0), "set_topology");
  starling_topology_free(topo);
  std::vector<std::vector<float>> in(kTensors, std::vector<float>(kFloats, 1.0f)),
      out(kTensors, std::vector<float>(kFloats));
  std::vector<int64_t> shape(kTensors, kFloats);
  std::vector<DLTensor> tin, tout;
  for (int j = 0; j < kTensors; ++j) {
    tin.push_back(Tensor(in[j].data(), &shape[j]));
    tout.push_back(Tensor(out[j].data(), &shape[j]));
  }
  std::vector<starling_request_t> reqs(kTensors);
  auto unfused = [&] {
    for (int j = 0; j < kTensors; ++j) Check(starling_neighbor_allreduce(b.ctx, &tin[j], &tout[j], nullptr), "na");
  };
  auto fused = [&] {
    for (int j = 0; j < kTensors; ++j)
      Check(starling_neighbor_allreduce_nonblocking(b.ctx, &tin[j], &tout[j], nullptr, &reqs[j]), "na");
    for (int j = 0; j < kTensors; ++j) {
      Check(starling_request_wait(reqs[j]), "wait");
      Check(starling_request_free(reqs[j]), "free");
    }
  };
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  Check(starling_get_stats(b.ctx, &before), "stats");
  std::vector<Row> rows{{"neighbor_allreduce x100", "fused vs waited", b.size, kFloats * 4 * kTensors,
                         Compare(unfused, fused, b.budget)}};
  Check(starling_get_stats(b.ctx, &after), "stats");
  Progress("fusion", kFloats * 4 * kTensors);
  ProgressEnd();
  if (b.rank == 0)
    std::fprintf(stderr, "fusion: %llu operations, %llu fused in %llu groups\n",
                 static_cast<unsigned long long>(after.operations - before.operations),
                 static_cast<unsigned long long>(after.fused_operations - before.fused_operations),
                 static_cast<unsigned long long>(after.fusion_groups - before.fusion_groups));
  return rows;
}

}  // namespace bench
