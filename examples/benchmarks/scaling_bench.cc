// scaling_bench: time per training step of each way to average a model across ranks,
// at a fixed model size per rank, with no computation between steps (so that the links,
// not the cores, set the time). Run by multihost_bench.sh on namespace hosts with
// rate-limited links; runs anywhere under mpirun.
//
//   mpirun -np N scaling_bench [--mib 4,16] [--methods LIST] [--steps 9] [--label TEXT]
//                              [--csv FILE]
//
// LIST (default all): allreduce (Starling's, average), mpi_allreduce (MPI_Allreduce,
// sum), exp2 (neighbor_allreduce over the static exponential-2 graph), one_peer
// (neighbor_allreduce, dynamic: one exp2 peer per step, cycling), hierarchical
// (hierarchical_neighbor_allreduce over an exp2 graph of machines; needs >= 2 ranks
// per machine), win_push (window put to one exp2 peer per step, then window update).
// Per method: one warm-up step, then --steps timed steps, each started by a barrier. A
// step's time is its slowest rank's; the median over steps is reported. cpu is the CPU
// time of all ranks over those steps divided by their wall time and the machine's cores
// (near 1.0: the cores, not the links, were the limit). Rank 0 prints one line per method and appends CSV rows:
// label,ranks,machines,mib,method,ms_per_step,cpu_share
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <starling/starling.h>

namespace {

int g_rank = 0;

void Check(starling_status_t status, const char* what) {
  if (status != STARLING_SUCCESS) {
    std::fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, what, starling_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

double Now(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

struct Buffers {
  std::vector<float> x, out;
  int64_t shape[1];
  DLTensor tx{}, tout{};
  explicit Buffers(size_t n) : x(n, 1.0f), out(n) {
    shape[0] = static_cast<int64_t>(n);
    for (DLTensor* t : {&tx, &tout}) {
      t->device = {kDLCPU, 0};
      t->ndim = 1;
      t->dtype = {kDLFloat, 32, 1};
      t->shape = shape;
    }
    tx.data = x.data();
    tout.data = out.data();
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(g_rank) + static_cast<float>(i % 7);
  }
};

// The next step of this rank's one-peer exp2 schedule: whom to send to, receive from.
struct OnePeer {
  starling_schedule_t sched = nullptr;
  int send = -1, recv = -1;
  OnePeer(starling_topology_t exp2, int rank) {
    Check(starling_schedule_dynamic_one_peer(exp2, rank, &sched), "schedule_dynamic_one_peer");
  }
  ~OnePeer() { starling_schedule_free(sched); }
  void Next() {
    int ns = 0, nr = 0;
    Check(starling_schedule_next(sched, &send, 1, &ns, &recv, 1, &nr), "schedule_next");
    if (ns != 1 || nr != 1) {
      std::fprintf(stderr, "one-peer schedule gave %d sends, %d receives\n", ns, nr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::vector<double> mibs = {4, 16};
  std::vector<std::string> methods = {"allreduce", "mpi_allreduce", "exp2", "one_peer", "hierarchical", "win_push"};
  int steps = 9;
  std::string label = "run", csv;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i], value = argv[i + 1];
    if (arg == "--mib") {
      mibs.clear();
      for (const std::string& m : Split(value)) mibs.push_back(std::atof(m.c_str()));
    } else if (arg == "--methods") {
      methods = Split(value);
    } else if (arg == "--steps") {
      steps = std::max(1, std::atoi(value.c_str()));
    } else if (arg == "--label") {
      label = value;
    } else if (arg == "--csv") {
      csv = value;
    } else {
      std::fprintf(stderr, "scaling_bench: unknown option %s\n", arg.c_str());
      MPI_Finalize();
      return 2;
    }
  }

  starling_context_t ctx;
  Check(starling_context_create(nullptr, &ctx), "context_create");
  int size = 0, machines = 0, local_size = 0;
  Check(starling_rank(ctx, &g_rank), "rank");
  Check(starling_size(ctx, &size), "size");
  Check(starling_machine_size(ctx, &machines), "machine_size");
  Check(starling_local_size(ctx, &local_size), "local_size");
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  starling_topology_t exp2 = nullptr, machine_exp2 = nullptr;
  Check(starling_topology_exponential_two(size, &exp2), "exponential_two");
  Check(starling_topology_exponential_two(machines, &machine_exp2), "exponential_two (machines)");
  Check(starling_set_topology(ctx, exp2, 0), "set_topology");
  FILE* out = nullptr;
  if (g_rank == 0 && !csv.empty()) out = std::fopen(csv.c_str(), "a");

  for (double mib : mibs) {
    Buffers b(static_cast<size_t>(mib * (1 << 20) / sizeof(float)));
    for (const std::string& method : methods) {
      std::function<void()> step;
      OnePeer peer(exp2, g_rank);
      starling_window_t win = nullptr;
      if (method == "allreduce") {
        step = [&] { Check(starling_allreduce(ctx, &b.tx, &b.tout, STARLING_AVERAGE, nullptr), "allreduce"); };
      } else if (method == "mpi_allreduce") {
        step = [&] {
          MPI_Allreduce(b.x.data(), b.out.data(), static_cast<int>(b.x.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
      } else if (method == "exp2") {
        step = [&] { Check(starling_neighbor_allreduce(ctx, &b.tx, &b.tout, nullptr), "neighbor_allreduce"); };
      } else if (method == "one_peer") {
        step = [&] {
          peer.Next();
          const double half = 0.5;
          starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
          args.dynamic = 1;
          args.use_weights = 1;
          args.self_weight = 0.5;
          args.num_sources = 1;
          args.source_ranks = &peer.recv;
          args.source_weights = &half;
          args.num_destinations = 1;
          args.destination_ranks = &peer.send;
          Check(starling_neighbor_allreduce(ctx, &b.tx, &b.tout, &args), "neighbor_allreduce (one peer)");
        };
      } else if (method == "hierarchical") {
        if (local_size < 2 || machines < 2) continue;  // needs machines of >= 2 ranks
        Check(starling_set_machine_topology(ctx, machine_exp2, 0), "set_machine_topology");
        step = [&] {
          Check(starling_hierarchical_neighbor_allreduce(ctx, &b.tx, &b.tout, nullptr), "hierarchical");
        };
      } else if (method == "win_push") {
        Check(starling_window_create(ctx, &b.tx, "scaling_bench", 0, &win), "window_create");
        step = [&] {
          peer.Next();
          starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
          args.num_ranks = 1;
          args.ranks = &peer.send;
          Check(starling_window_put(win, &b.tx, &args), "window_put");
          Check(starling_window_update(win, nullptr), "window_update");
        };
      } else {
        if (g_rank == 0) std::fprintf(stderr, "scaling_bench: unknown method %s\n", method.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }

      step();  // warm-up: connections, scratch memory
      // Every step starts together (a barrier) and lasts until its slowest rank is
      // done; the median over steps resists the other jobs on this machine.
      std::vector<double> mine(steps), slowest(steps);
      double wall = 0, cpu = 0;
      for (int s = 0; s < steps; ++s) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = Now(CLOCK_MONOTONIC), c0 = Now(CLOCK_PROCESS_CPUTIME_ID);
        step();
        mine[s] = Now(CLOCK_MONOTONIC) - t0;
        cpu += Now(CLOCK_PROCESS_CPUTIME_ID) - c0;
      }
      if (win != nullptr) Check(starling_window_free(win), "window_free");
      MPI_Reduce(mine.data(), slowest.data(), steps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      double cpu_all = 0;
      MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
      if (g_rank == 0) {
        for (double t : slowest) wall += t;
        std::sort(slowest.begin(), slowest.end());
        const double median = steps % 2 ? slowest[steps / 2] : 0.5 * (slowest[steps / 2 - 1] + slowest[steps / 2]);
        const double ms = median * 1e3, share = cpu_all / (wall * static_cast<double>(cores));
        std::printf("%-10s ranks %2d machines %2d %5.0f MiB  %-13s %9.2f ms/step  cpu %.2f\n", label.c_str(), size,
                    machines, mib, method.c_str(), ms, share);
        std::fflush(stdout);
        if (out) {
          std::fprintf(out, "%s,%d,%d,%g,%s,%.3f,%.3f\n", label.c_str(), size, machines, mib, method.c_str(), ms, share);
          std::fflush(out);
        }
      }
    }
  }
  if (out) std::fclose(out);
  starling_topology_free(exp2);
  starling_topology_free(machine_exp2);
  Check(starling_context_destroy(ctx), "context_destroy");
  MPI_Finalize();
  return 0;
}
