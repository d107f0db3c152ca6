// What only several hosts can show (run by run_tests.sh under starlingrun on
// namespace hosts):
//
//   multihost_program machines HOSTS RANKS_PER_HOST
//       Machines detected from the hosts (no nodes_per_machine, no
//       STARLING_NODES_PER_MACHINE): machine_size == HOSTS, local_size ==
//       RANKS_PER_HOST, ranks that share a host name share a machine and no others do;
//       then local_allreduce, set_machine_topology (ring and exp2, weighted and not) with
//       hierarchical_neighbor_allreduce, and its dynamic form, each against a float64
//       reference computed here from every rank's input.
//   multihost_program loop SECONDS
//       allreduce in a loop (checking each result) until an operation fails or SECONDS
//       pass; prints "READY rank=R host=H" once every rank has done one. Exit 0 after
//       SECONDS, 1 when an operation failed or a result was wrong. The harness kills a
//       rank or a host while it runs.
// Prints "FAIL rank=R: why" and exits 1 on the first wrong result.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <starling/starling.h>

namespace {

int g_rank = -1;

[[noreturn]] void Fail(const std::string& why) {
  std::printf("FAIL rank=%d: %s (last error: %s)\n", g_rank, why.c_str(), starling_last_error());
  std::fflush(stdout);
  std::exit(1);
}

void Check(starling_status_t status, const char* what) {
  if (status != STARLING_SUCCESS) Fail(std::string(what) + " failed");
}

template <typename T>
struct Tensor {
  std::vector<T> data;
  int64_t shape[1];
  DLTensor t{};
  Tensor(size_t n, DLDataType dtype) : data(n) {
    shape[0] = static_cast<int64_t>(n);
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = dtype;
    t.shape = shape;
  }
};
constexpr DLDataType kF64{kDLFloat, 64, 1};
constexpr DLDataType kU8{kDLUInt, 8, 1};
constexpr DLDataType kI32{kDLInt, 32, 1};
constexpr size_t kLen = 1000;       // elements per tensor: several chunks' worth is not needed
constexpr size_t kNameBytes = 64;   // host name slot in the gather

double Input(int rank, size_t i) { return rank * 1000.0 + static_cast<double>(i) * 0.5 + 0.25; }

void ExpectNear(double got, double want, const std::string& what) {
  if (std::fabs(got - want) > 1e-9 * (1.0 + std::fabs(want))) {
    Fail(what + ": got " + std::to_string(got) + ", expected " + std::to_string(want));
  }
}

struct Layout {
  int size = 0, rank = 0, machines = 0, machine = 0, local_size = 0, local_rank = 0;
  std::vector<std::string> hosts;  // per rank
  std::vector<int> machine_of;     // per rank
};

Layout Detect(starling_context_t ctx) {
  Layout l;
  Check(starling_size(ctx, &l.size), "size");
  Check(starling_rank(ctx, &l.rank), "rank");
  Check(starling_machine_size(ctx, &l.machines), "machine_size");
  Check(starling_machine_rank(ctx, &l.machine), "machine_rank");
  Check(starling_local_size(ctx, &l.local_size), "local_size");
  Check(starling_local_rank(ctx, &l.local_rank), "local_rank");

  Tensor<uint8_t> name(kNameBytes, kU8), names(kNameBytes * l.size, kU8);
  char host[kNameBytes] = {};
  if (gethostname(host, sizeof host - 1) != 0) Fail("gethostname");
  std::memcpy(name.data.data(), host, std::strlen(host));
  Check(starling_allgather(ctx, &name.t, &names.t, nullptr, nullptr), "allgather of host names");
  Tensor<int32_t> mine(1, kI32), all(l.size, kI32);
  mine.data[0] = l.machine;
  Check(starling_allgather(ctx, &mine.t, &all.t, nullptr, nullptr), "allgather of machine ranks");
  for (int r = 0; r < l.size; ++r) {
    l.hosts.emplace_back(reinterpret_cast<const char*>(&names.data[kNameBytes * r]));
    l.machine_of.push_back(all.data[r]);
  }
  return l;
}

// Per-machine mean of Input(), element i.
double MachineMean(const Layout& l, int m, size_t i) {
  double sum = 0;
  int n = 0;
  for (int r = 0; r < l.size; ++r) {
    if (l.machine_of[r] == m) sum += Input(r, i), ++n;
  }
  return sum / n;
}

int Machines(int hosts, int per_host) {
  if (std::getenv("STARLING_NODES_PER_MACHINE") || std::getenv("BLUEFOG_NODES_PER_MACHINE"))
    Fail("STARLING_NODES_PER_MACHINE is set: machines must be detected, not simulated");
  starling_context_t ctx;
  Check(starling_context_create(nullptr, &ctx), "context_create");
  Layout l = Detect(ctx);
  g_rank = l.rank;
  if (l.size != hosts * per_host) Fail("size " + std::to_string(l.size));
  if (l.machines != hosts) Fail("machine_size is " + std::to_string(l.machines) + ", hosts " + std::to_string(hosts));
  if (l.local_size != per_host) Fail("local_size is " + std::to_string(l.local_size));
  int homogeneous = 0;
  Check(starling_is_homogeneous(ctx, &homogeneous), "is_homogeneous");
  if (!homogeneous) Fail("layout not homogeneous");
  for (int a = 0; a < l.size; ++a) {
    for (int b = 0; b < l.size; ++b) {
      if ((l.hosts[a] == l.hosts[b]) != (l.machine_of[a] == l.machine_of[b]))
        Fail("ranks " + std::to_string(a) + " (" + l.hosts[a] + ") and " + std::to_string(b) + " (" +
             l.hosts[b] + ") disagree with their machines");
    }
  }

  Tensor<double> x(kLen, kF64), out(kLen, kF64);
  for (size_t i = 0; i < kLen; ++i) x.data[i] = Input(l.rank, i);
  Check(starling_local_allreduce(ctx, &x.t, &out.t, STARLING_AVERAGE, nullptr), "local_allreduce");
  for (size_t i = 0; i < kLen; ++i) ExpectNear(out.data[i], MachineMean(l, l.machine, i), "local_allreduce");

  // Static: the machine graph's weights (weighted) or a uniform average over self and
  // in-neighbors (unweighted), as hierarchical_neighbor_allreduce documents.
  for (int kind = 0; kind < 2; ++kind) {
    starling_topology_t topo;
    if (kind == 0) Check(starling_topology_ring(l.machines, STARLING_RING_BIDIRECTIONAL, &topo), "ring");
    else Check(starling_topology_exponential_two(l.machines, &topo), "exp2");
    double self_weight = 0;
    std::vector<int> from(l.machines);
    std::vector<double> weight(l.machines);
    int count = 0;
    Check(starling_topology_recv_weights(topo, l.machine, &self_weight, from.data(), weight.data(), l.machines, &count),
          "recv_weights");
    for (int weighted = 0; weighted < 2; ++weighted) {
      Check(starling_set_machine_topology(ctx, topo, weighted), "set_machine_topology");
      Check(starling_hierarchical_neighbor_allreduce(ctx, &x.t, &out.t, nullptr), "hierarchical_neighbor_allreduce");
      for (size_t i = 0; i < kLen; ++i) {
        double want = (weighted ? self_weight : 1.0) * MachineMean(l, l.machine, i);
        for (int k = 0; k < count; ++k) want += (weighted ? weight[k] : 1.0) * MachineMean(l, from[k], i);
        if (!weighted) want /= count + 1;
        ExpectNear(out.data[i], want,
                   std::string("hierarchical ") + (kind ? "exp2" : "ring") + (weighted ? " weighted" : ""));
      }
    }
    Check(starling_topology_free(topo), "topology_free");
  }

  // Dynamic: machine m receives from m + 1 with weight 0.5 (the one-peer pattern).
  const int src = (l.machine + 1) % l.machines, dst = (l.machine - 1 + l.machines) % l.machines;
  const double half = 0.5;
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.dynamic = 1;
  args.use_weights = 1;
  args.self_weight = 0.5;
  args.num_sources = 1;
  args.source_ranks = &src;
  args.source_weights = &half;
  args.num_destinations = 1;
  args.destination_ranks = &dst;
  Check(starling_hierarchical_neighbor_allreduce(ctx, &x.t, &out.t, &args), "dynamic hierarchical");
  for (size_t i = 0; i < kLen; ++i)
    ExpectNear(out.data[i], 0.5 * MachineMean(l, l.machine, i) + 0.5 * MachineMean(l, src, i), "dynamic hierarchical");

  Check(starling_context_destroy(ctx), "context_destroy");
  std::printf("OK rank=%d host=%s machine=%d/%d local=%d/%d\n", l.rank, l.hosts[l.rank].c_str(), l.machine, l.machines,
              l.local_rank, l.local_size);
  return 0;
}

int Loop(double seconds) {
  starling_context_t ctx;
  Check(starling_context_create(nullptr, &ctx), "context_create");
  int size = 0;
  Check(starling_rank(ctx, &g_rank), "rank");
  Check(starling_size(ctx, &size), "size");
  char host[kNameBytes] = {};
  gethostname(host, sizeof host - 1);
  Tensor<double> x(kLen, kF64), out(kLen, kF64);
  for (size_t i = 0; i < kLen; ++i) x.data[i] = Input(g_rank, i);
  const auto start = std::chrono::steady_clock::now();
  for (long step = 0;; ++step) {
    if (starling_allreduce(ctx, &x.t, &out.t, STARLING_SUM, nullptr) != STARLING_SUCCESS) {
      std::printf("STOPPED rank=%d step=%ld: %s\n", g_rank, step, starling_last_error());
      std::fflush(stdout);
      return 1;
    }
    for (size_t i = 0; i < kLen; i += 97) {
      double want = 0;
      for (int r = 0; r < size; ++r) want += Input(r, i);
      ExpectNear(out.data[i], want, "allreduce");
    }
    if (step == 0) {
      std::printf("READY rank=%d host=%s pid=%d\n", g_rank, host, static_cast<int>(getpid()));
      std::fflush(stdout);
    }
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (elapsed.count() > seconds) break;
    usleep(2000);  // ranks outnumber cores: leave room for the others
  }
  Check(starling_context_destroy(ctx), "context_destroy");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "machines" && argc == 4) return Machines(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "loop" && argc == 3) return Loop(std::atof(argv[2]));
  std::fprintf(stderr, "usage: %s machines HOSTS RANKS_PER_HOST | loop SECONDS\n", argv[0]);
  return 2;
}
