// Neighbor averaging and windows on one host against their limits, in alternating
// batches of one run, over the exponential-2 topology, float32 (--op):
//   neighbor        starling_neighbor_allreduce, uniform weights
//   win_put         starling_window_put to every out-neighbor + starling_window_update
//   win_accumulate  starling_window_accumulate to every out-neighbor
//   win_get         starling_window_get from every in-neighbor
//   pair_gossip     starling_pair_gossip with rank ^ 1, weights 0.5 and 0.5 (even sizes)
//   allreduce       starling_allreduce (sum), against MPI_Allreduce
//   broadcast       starling_broadcast from rank 0, against MPI_Bcast
//   allgather       starling_allgather (equal blocks), against MPI_Allgather
// each through shared memory, or through MPI with STARLING_SHM=0, against:
//   raw_mpi   MPI_Irecv from each in-neighbor, MPI_Isend to each out-neighbor,
//             MPI_Waitall, then the same combine in one pass (the MPI path's floor;
//             win_put sends what its previous average wrote, as put + update does;
//             win_get: the exchange alone, no combine)
//   memcpy    one copy of the tensor (what publishing it costs)
//   local     the same combine with every input in local memory (the local limit):
//             neighbor: out = (x + y) / 2; win_put: a copy per out-neighbor (the
//             puts) and the average over the in-neighbors' inputs (the update);
//             win_accumulate: acc += x per out-neighbor; win_get: a copy per
//             in-neighbor; allreduce: the sum of every rank's tensor; broadcast: one
//             copy; allgather: one copy per rank's block
// --require-mutex 1: the window operations under the window mutex (push-sum's way).
// Prints microseconds per call (median of blocks) and the ratios. Run it with
// STARLING_SHM=1 and =0 (examples/benchmarks/shm_neighbor_bench.sh does both):
//   mpirun -n 2 build/examples/benchmarks/shm_neighbor_bench [--op win_put] [--sizes 4096,65536] [--seconds 1]
#include <mpi.h>
#include <starling/starling.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void Check(starling_status_t s, const char* what) {
  if (s != STARLING_SUCCESS) {
    std::fprintf(stderr, "%s failed: %s\n", what, starling_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

std::vector<size_t> ParseSizes(const char* text) {
  std::vector<size_t> sizes;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    sizes.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
  }
  return sizes;
}

// Median per-call seconds of each function, measured in alternating blocks of `calls`
// calls until each has run about `seconds` (rank 0 decides when to stop).
std::vector<double> Measure(const std::vector<std::function<void()>>& fns, int calls, double seconds) {
  std::vector<std::vector<double>> samples(fns.size());
  double spent = 0;
  for (int block = 0;; ++block) {
    for (size_t f = 0; f < fns.size(); ++f) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = Now();
      for (int c = 0; c < calls; ++c) fns[f]();
      const double t = (Now() - start) / calls;
      samples[f].push_back(t);
      spent += t * calls;
    }
    int stop = block >= 4 && spent > seconds * static_cast<double>(fns.size());
    MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (stop) break;
  }
  std::vector<double> medians;
  for (auto& s : samples) {
    std::sort(s.begin(), s.end());
    medians.push_back(s[s.size() / 2]);
  }
  return medians;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::vector<size_t> sizes = {4096, 65536, 1u << 20, 16u << 20};
  double seconds = 1.0;
  std::string op = "neighbor";
  int require_mutex = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--sizes") == 0) sizes = ParseSizes(argv[i + 1]);
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--op") == 0) op = argv[i + 1];
    if (std::strcmp(argv[i], "--require-mutex") == 0) require_mutex = std::atoi(argv[i + 1]);
  }
  const std::vector<std::string> ops = {"neighbor",    "win_put",   "win_accumulate", "win_get",
                                       "pair_gossip", "allreduce", "broadcast",      "allgather"};
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
    std::fprintf(stderr,
                 "--op must be neighbor, win_put, win_accumulate, win_get, pair_gossip, allreduce, broadcast or "
                 "allgather, not %s\n",
                 op.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  starling_context_t ctx;
  Check(starling_context_create(nullptr, &ctx), "context_create");
  int rank = 0, size = 1;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  int nin = 0, nout = 0;
  starling_in_neighbors(ctx, nullptr, 0, &nin);
  starling_out_neighbors(ctx, nullptr, 0, &nout);
  std::vector<int> in(nin), out(nout);
  if (nin) starling_in_neighbors(ctx, in.data(), nin, &nin);
  if (nout) starling_out_neighbors(ctx, out.data(), nout, &nout);
  const bool gossip = op == "pair_gossip";
  if (gossip) {  // one partner, both ways: the raw code and the local limit are those of an in-degree of 1
    if (size % 2 != 0) {
      if (rank == 0) std::fprintf(stderr, "--op pair_gossip needs an even number of ranks\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    in = out = {rank ^ 1};
    nin = nout = 1;
  }
  const char* shm = std::getenv("STARLING_SHM");
  const std::string path = shm != nullptr && std::string(shm) == "0" ? "mpi" : "shm";
  if (rank == 0) {
    std::printf("# %s%s, %d ranks, exponential-2 topology (in-degree %d), float32, STARLING_SHM=%s\n", op.c_str(),
                require_mutex ? " (require_mutex)" : "", size, nin, shm ? shm : "1 (default)");
    std::printf("%-10s %-5s %12s %12s %12s %12s %10s %10s\n", "bytes", "path", "starling_us", "raw_mpi_us",
                "memcpy_us", "local_us", "vs_raw", "vs_local");
  }
  for (size_t bytes : sizes) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> x(n, 1.0f + rank), y(n, 2.0f), result(n);
    std::vector<std::vector<float>> recv(static_cast<size_t>(nin), std::vector<float>(n));
    int64_t shape = static_cast<int64_t>(n);
    DLTensor tx{}, to{};
    tx.data = x.data();
    tx.device = {kDLCPU, 0};
    tx.ndim = 1;
    tx.dtype = {kDLFloat, 32, 1};
    tx.shape = &shape;
    to = tx;
    to.data = result.data();
    const float w = 1.0f / static_cast<float>(nin + 1);
    const bool put = op == "win_put", accumulate = op == "win_accumulate", get = op == "win_get";
    const bool allreduce = op == "allreduce", broadcast = op == "broadcast", allgather = op == "allgather";
    // allreduce's local limit: every other rank's tensor, already local; allgather's output.
    std::vector<std::vector<float>> others(allreduce ? static_cast<size_t>(size - 1) : 0, std::vector<float>(n, 2.0f));
    std::vector<float> gathered(allgather ? n * static_cast<size_t>(size) : 0);
    int64_t total = static_cast<int64_t>(gathered.size());
    DLTensor tg = tx;
    tg.data = gathered.data();
    tg.shape = &total;
    starling_window_t win = nullptr;
    if (put || accumulate || get) Check(starling_window_create(ctx, &tx, "bench", 1, &win), "window_create");
    std::vector<float> next(n, 1.0f + rank);  // raw win_put: the average it sends next
    starling_window_args_t wargs = STARLING_WINDOW_ARGS_INIT;
    wargs.require_mutex = require_mutex;
    starling_window_update_args_t uargs = STARLING_WINDOW_UPDATE_ARGS_INIT;
    uargs.require_mutex = require_mutex;
    auto starling = [&] {
      if (put) {
        Check(starling_window_put(win, &tx, &wargs), "window_put");
        Check(starling_window_update(win, &uargs), "window_update");
      } else if (accumulate) {
        Check(starling_window_accumulate(win, &tx, &wargs), "window_accumulate");
      } else if (get) {
        Check(starling_window_get(win, &wargs), "window_get");
      } else if (allreduce) {
        Check(starling_allreduce(ctx, &tx, &to, STARLING_SUM, nullptr), "allreduce");
      } else if (broadcast) {
        Check(starling_broadcast(ctx, &tx, &tx, 0, nullptr), "broadcast");
      } else if (allgather) {
        Check(starling_allgather(ctx, &tx, &tg, nullptr, nullptr), "allgather");
      } else if (gossip) {
        Check(starling_pair_gossip(ctx, &tx, &to, rank ^ 1, 0.5, 0.5, nullptr), "pair_gossip");
      } else {
        Check(starling_neighbor_allreduce(ctx, &tx, &to, nullptr), "neighbor_allreduce");
      }
    };
    auto raw = [&] {
      const int count = static_cast<int>(n);
      if (allreduce) {
        MPI_Allreduce(x.data(), result.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        return;
      }
      if (broadcast) {
        MPI_Bcast(x.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        return;
      }
      if (allgather) {
        MPI_Allgather(x.data(), count, MPI_FLOAT, gathered.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
        return;
      }
      std::vector<MPI_Request> reqs;
      for (int s = 0; s < nin; ++s) {
        reqs.emplace_back();
        MPI_Irecv(recv[s].data(), static_cast<int>(n), MPI_FLOAT, in[s], 7, MPI_COMM_WORLD, &reqs.back());
      }
      for (int d = 0; d < nout; ++d) {
        reqs.emplace_back();
        MPI_Isend(put ? next.data() : x.data(), static_cast<int>(n), MPI_FLOAT, out[d], 7, MPI_COMM_WORLD,
                  &reqs.back());
      }
      MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
      if (get) return;
      if (accumulate) {
        for (int j = 0; j < nin; ++j) {
          float* __restrict acc = result.data();
          const float* __restrict b = recv[j].data();
          for (size_t i = 0; i < n; ++i) acc[i] += b[i];
        }
        return;
      }
      float* __restrict o = put ? next.data() : result.data();
      const float* __restrict a = x.data();
      if (nin == 1) {  // one vectorized pass, as the local average below
        const float* __restrict b = recv[0].data();
        for (size_t i = 0; i < n; ++i) o[i] = (a[i] + b[i]) * w;
        return;
      }
      for (size_t i = 0; i < n; ++i) o[i] = a[i];
      for (int j = 0; j < nin; ++j) {
        const float* __restrict b = recv[j].data();
        for (size_t i = 0; i < n; ++i) o[i] += b[i];
      }
      for (size_t i = 0; i < n; ++i) o[i] *= w;
    };
    auto copy = [&] { std::memcpy(result.data(), x.data(), bytes); };
    auto local = [&] {
      float* __restrict o = result.data();
      const float* __restrict a = x.data();
      const float* __restrict b = y.data();
      if (allreduce) {  // one pass over every rank's tensor
        if (size == 1) {
          std::memcpy(o, a, bytes);
          return;
        }
        for (size_t i = 0; i < n; ++i) o[i] = a[i] + others[0][i];
        for (int r = 1; r < size - 1; ++r) {
          const float* __restrict c = others[static_cast<size_t>(r)].data();
          for (size_t i = 0; i < n; ++i) o[i] += c[i];
        }
        return;
      }
      if (broadcast) {  // the root copies nothing
        if (rank != 0) std::memcpy(o, a, bytes);
        return;
      }
      if (allgather) {  // one copy per block
        for (int r = 0; r < size; ++r) std::memcpy(gathered.data() + n * static_cast<size_t>(r), a, bytes);
        return;
      }
      if (get) {  // one copy per source
        for (int j = 0; j < nin; ++j) std::memcpy(recv[j].data(), a, bytes);
        return;
      }
      if (accumulate) {  // one addition per destination
        for (int d = 0; d < nout; ++d)
          for (size_t i = 0; i < n; ++i) o[i] += a[i];
        return;
      }
      if (!put) {
        for (size_t i = 0; i < n; ++i) o[i] = (a[i] + b[i]) * 0.5f;
        return;
      }
      // One copy per destination, then the average over the in-degree's inputs.
      for (int d = 0; d < nout; ++d) std::memcpy(y.data(), next.data(), bytes);
      for (size_t i = 0; i < n; ++i) o[i] = a[i];
      for (int j = 0; j < nin; ++j) {
        const float* __restrict r = j == 0 ? b : recv[j].data();
        for (size_t i = 0; i < n; ++i) o[i] += r[i];
      }
      for (size_t i = 0; i < n; ++i) o[i] *= w;
    };
    starling();  // warm up: pages, outbox reservations
    raw();
    const int calls = bytes >= (1u << 20) ? 5 : bytes >= 65536 ? 50 : 500;
    const std::vector<double> t = Measure({starling, raw, copy, local}, calls, seconds);
    if (win) Check(starling_window_free(win), "window_free");
    // The slowest rank's times decide.
    std::vector<double> worst(t.size());
    MPI_Allreduce(t.data(), worst.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("%-10zu %-5s %12.1f %12.1f %12.1f %12.1f %10.2f %10.2f\n", bytes, path.c_str(), worst[0] * 1e6,
                  worst[1] * 1e6, worst[2] * 1e6, worst[3] * 1e6, worst[0] / worst[1], worst[0] / worst[3]);
      std::fflush(stdout);
    }
  }
  Check(starling_context_destroy(ctx), "context_destroy");
  MPI_Finalize();
  return 0;
}
