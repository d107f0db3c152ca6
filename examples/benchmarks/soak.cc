// starling_soak: a long run of mixed operations (not a CI test) that looks for leaks
// and slow degradation. Every rank draws the same seeded sequence of allreduce,
// broadcast, allgather, static and dynamic neighbor_allreduce, window put /
// accumulate / get / update and window create/free cycles, so collectives line up.
// Rank 0 prints one line per 10% with the elapsed time and the largest resident set
// (VmRSS) over the ranks. After warm-up (the first 10%, when scratch pools reach their
// working size) the largest RSS may grow by at most --max-growth-mib; otherwise, or if
// an operation fails or an allreduce gives a wrong sum, the exit status is 1. (The
// default bound, 16 MiB over 9 * 10^4 operations, is a leak of about 190 bytes per
// operation; a healthy run grows by under 1 MiB.)
//
//   mpirun -n 4 build/examples/benchmarks/starling_soak [--ops 100000] [--max-growth-mib 16] [--seed 1]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <starling/starling.h>

namespace {

// Exits on the first failed call: a soak that goes on after an error measures nothing.
void Check(starling_status_t status, const char* what) {
  if (status == STARLING_SUCCESS) return;
  std::fprintf(stderr, "soak: %s failed: %s\n", what, starling_last_error());
  std::exit(1);
}

// This process's resident set, in MiB (VmRSS in /proc/self/status).
double RssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0.0;
}

template <typename T>
DLTensor View(std::vector<T>& v, int64_t* shape, int ndim, DLDataType dtype) {
  DLTensor t{};
  t.data = v.data();
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}
constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kI64{kDLInt, 64, 1};

std::vector<int> Neighbors(starling_context_t ctx, bool in) {
  int count = 0;
  (in ? starling_in_neighbors : starling_out_neighbors)(ctx, nullptr, 0, &count);  // sets count
  std::vector<int> v(static_cast<size_t>(count));
  if (count > 0) Check((in ? starling_in_neighbors : starling_out_neighbors)(ctx, v.data(), count, &count), "neighbors");
  return v;
}

// A persistent window over its own float32 tensor.
struct Win {
  std::vector<float> data;
  int64_t shape[1];
  DLTensor tensor;
  starling_window_t handle;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t total = 100000;
  double max_growth_mib = 16.0;
  unsigned seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--ops")) total = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-growth-mib")) max_growth_mib = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  starling_context_t ctx;
  Check(starling_context_create(nullptr, &ctx), "context_create");
  int rank = 0, size = 1;
  Check(starling_rank(ctx, &rank), "rank");
  Check(starling_size(ctx, &size), "size");
  const std::vector<int> in = Neighbors(ctx, true), out = Neighbors(ctx, false);

  // The largest of `value` over the ranks (an allreduce outside the counted operations).
  auto max_over_ranks = [&](double value) {
    std::vector<double> v{value};
    int64_t shape[1] = {1};
    DLTensor t = View(v, shape, 1, DLDataType{kDLFloat, 64, 1});
    Check(starling_allreduce(ctx, &t, &t, STARLING_MAX, "soak max"), "allreduce (max)");
    return v[0];
  };
  const double rss_start = max_over_ranks(RssMib());

  // Sizes from a fixed set (small, at the inline size, large) so pools settle.
  const int64_t kSizes[] = {16, 4096, 65536};
  std::vector<Win> windows(3);
  for (size_t w = 0; w < windows.size(); ++w) {
    Win& win = windows[w];
    win.data.assign(static_cast<size_t>(kSizes[w]), 1.0f);
    win.shape[0] = kSizes[w];
    win.tensor = View(win.data, win.shape, 1, kF32);
    Check(starling_window_create(ctx, &win.tensor, ("soak " + std::to_string(w)).c_str(), 0, &win.handle),
          "window_create");
  }
  std::vector<float> a(65536), b(65536 * static_cast<size_t>(size));
  std::vector<int64_t> ia(4096), ib(4096);

  std::mt19937 rng(seed);  // the same sequence on every rank
  const auto start = std::chrono::steady_clock::now();
  double my_rss_after_warmup = 0, rss_after_warmup = 0, rss_end = 0, growth = 0;
  int64_t tenth = total / 10 > 0 ? total / 10 : 1;
  int failures = 0;
  for (int64_t op = 0; op < total; ++op) {
    int64_t n = kSizes[rng() % 3];
    int64_t shape[2] = {n, 1};
    DLTensor ta = View(a, shape, 1, kF32), tb = View(b, shape, 1, kF32);
    Win& win = windows[rng() % windows.size()];
    switch (rng() % 11) {
      case 0: {  // exact integer allreduce: a wrong sum is a failure
        int64_t m = n < 4096 ? n : 4096;
        int64_t ishape[1] = {m};
        for (int64_t i = 0; i < m; ++i) ia[static_cast<size_t>(i)] = rank + i % 7;
        DLTensor x = View(ia, ishape, 1, kI64), y = View(ib, ishape, 1, kI64);
        Check(starling_allreduce(ctx, &x, &y, STARLING_SUM, "soak allreduce"), "allreduce");
        for (int64_t i = 0; i < m; ++i)
          if (ib[static_cast<size_t>(i)] != int64_t{size} * (size - 1) / 2 + size * (i % 7)) ++failures;
        break;
      }
      case 1:
        Check(starling_allreduce(ctx, &ta, &tb, STARLING_AVERAGE, "soak average"), "allreduce");
        break;
      case 2:
        Check(starling_broadcast(ctx, &ta, &tb, static_cast<int>(op % size), "soak broadcast"), "broadcast");
        break;
      case 3: {  // first dimensions differ between ranks
        int64_t mine[2] = {rank + 1, 16}, all[2] = {int64_t{size} * (size + 1) / 2, 16};
        DLTensor x = View(a, mine, 2, kF32), y = View(b, all, 2, kF32);
        Check(starling_allgather(ctx, &x, &y, nullptr, "soak allgather"), "allgather");
        break;
      }
      case 4:
        Check(starling_neighbor_allreduce(ctx, &ta, &tb, nullptr), "neighbor_allreduce");
        break;
      case 5: {  // dynamic: send to rank + d, receive from rank - d
        if (size < 2) break;
        const int d = 1 + static_cast<int>(op % (size - 1));
        const int dst = (rank + d) % size, src = (rank - d + size) % size;
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
        Check(starling_neighbor_allreduce(ctx, &ta, &tb, &args), "neighbor_allreduce (dynamic)");
        break;
      }
      case 6:
        Check(starling_window_put(win.handle, &win.tensor, nullptr), "window_put");
        break;
      case 7: {
        starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
        args.self_weight = 0.5;  // push-sum style: what is sent is taken off
        Check(starling_window_accumulate(win.handle, &win.tensor, &args), "window_accumulate");
        break;
      }
      case 8:
        Check(starling_window_get(win.handle, nullptr), "window_get");
        break;
      case 9: {
        starling_window_update_args_t u = STARLING_WINDOW_UPDATE_ARGS_INIT;
        u.reset = static_cast<int>(op % 2);
        Check(starling_window_update(win.handle, &u), "window_update");
        break;
      }
      case 10: {  // create, use at once, free
        starling_window_t tmp;
        Check(starling_window_create(ctx, &ta, "soak cycle", 1, &tmp), "window_create");
        Check(starling_window_put(tmp, &ta, nullptr), "window_put");
        Check(starling_window_free(tmp), "window_free");
        break;
      }
    }
    if ((op + 1) % tenth == 0 || op + 1 == total) {
      const double mine = RssMib(), rss = max_over_ranks(mine);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (op + 1 == tenth) {
        my_rss_after_warmup = mine;
        rss_after_warmup = rss;
      }
      if (op + 1 == total) {
        rss_end = rss;
        growth = max_over_ranks(mine - my_rss_after_warmup);  // the worst rank's own growth
      }
      if (rank == 0)
        std::printf("soak: %3d%% %8lld ops %7.1f s  max RSS %.1f MiB\n", static_cast<int>(100 * (op + 1) / total),
                    static_cast<long long>(op + 1), seconds, rss);
      std::fflush(stdout);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (Win& win : windows) Check(starling_window_free(win.handle), "window_free");
  starling_stats_t stats = STARLING_STATS_INIT;
  Check(starling_get_stats(ctx, &stats), "get_stats");
  int status = 0;
  if (rank == 0) {
    std::printf("soak: %lld ops on %d ranks in %.1f s (%.0f ops/s per rank); max RSS %.1f MiB at start, %.1f after "
                "warm-up, %.1f at the end; worst rank's growth after warm-up %+.1f MiB (bound %.1f); scratch %.1f MiB\n",
                static_cast<long long>(total), size, seconds, total / seconds, rss_start, rss_after_warmup, rss_end,
                growth, max_growth_mib, stats.scratch_bytes / 1048576.0);
    if (growth > max_growth_mib) {
      std::printf("soak: FAILED: RSS grew by %.1f MiB after warm-up\n", growth);
      status = 1;
    }
  }
  if (failures > 0) {
    std::printf("soak: FAILED: rank %d saw %d wrong allreduce elements\n", rank, failures);
    status = 1;
  }
  Check(starling_context_destroy(ctx), "context_destroy");
  return status;
}
