// compress_bench: bytes on the wire and time per step of compressed allreduce and CHOCO
// neighbor averaging, against the uncompressed operations, in one run.
//
//   mpirun -np 4 compress_bench [--sizes 4194304,67108864] [--steps 5]
//
// For each tensor size (float32 bytes) and each compressor: the median time per call
// over --steps calls (after one warm-up call) and, per rank and call, the bytes handed
// to MPI (starling_stats_t.bytes_sent: payload and headers) and the compressed payload
// with what it would have been uncompressed (bytes_after/before_compression). Error
// feedback is on for top-k, random-k and sign (allreduce); CHOCO uses gamma 1 for the
// casts and 0.4 otherwise (only the time per step matters here). Rank 0 prints a table.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <starling/starling.h>

namespace {

#define CHECK(call)                                                                          \
  do {                                                                                       \
    starling_status_t s_ = (call);                                                           \
    if (s_ != STARLING_SUCCESS) {                                                            \
      std::fprintf(stderr, "%s failed: %d %s\n", #call, s_, starling_last_error());          \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
    }                                                                                        \
  } while (0)

struct Compressor {
  const char* label;
  int kind;
  double ratio;
};

const Compressor kCompressors[] = {
    {"none", STARLING_COMPRESS_NONE, 0},        {"float16", STARLING_COMPRESS_FLOAT16, 0},
    {"bfloat16", STARLING_COMPRESS_BFLOAT16, 0}, {"top-k 1%", STARLING_COMPRESS_TOPK, 0.01},
    {"random-k 1%", STARLING_COMPRESS_RANDOMK, 0.01}, {"sign", STARLING_COMPRESS_SIGN, 0},
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::vector<size_t> sizes = {size_t{4} << 20, size_t{64} << 20};
  int steps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--sizes" && i + 1 < argc) {
      sizes.clear();
      std::stringstream list(argv[++i]);
      for (std::string s; std::getline(list, s, ',');) sizes.push_back(std::strtoull(s.c_str(), nullptr, 10));
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: compress_bench [--sizes B1,B2,...] [--steps N]\n");
      MPI_Finalize();
      return arg == "--help" ? 0 : 2;
    }
  }
  starling_context_t ctx = nullptr;
  CHECK(starling_context_create(nullptr, &ctx));
  int rank = 0, size = 1;
  CHECK(starling_rank(ctx, &rank));
  CHECK(starling_size(ctx, &size));
  if (rank == 0)
    std::printf("%-18s %-12s %9s %12s %14s %14s %8s\n", "operation", "compressor", "size", "ms/step",
                "wire B/step", "payload B/step", "ratio");
  for (size_t bytes : sizes) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> in(n), out(n);
    for (size_t i = 0; i < n; ++i) in[i] = std::sin(0.001f * static_cast<float>(i) + static_cast<float>(rank));
    int64_t shape[1] = {static_cast<int64_t>(n)};
    DLTensor tin{in.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    DLTensor tout{out.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    for (int neighbor = 0; neighbor < 2; ++neighbor) {
      for (const Compressor& c : kCompressors) {
        starling_compression_t opt = STARLING_COMPRESSION_INIT;
        opt.compressor = c.kind;
        opt.ratio = c.ratio;
        opt.seed = 42;
        const bool biased = c.kind >= STARLING_COMPRESS_TOPK;
        opt.error_feedback = !neighbor && biased ? 1 : 0;
        opt.gamma = biased ? 0.4 : 1.0;
        const std::string name = std::string(neighbor ? "bench.choco." : "bench.ar.") + c.label + std::to_string(bytes);
        starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
        args.name = name.c_str();
        auto call = [&] {
          if (neighbor)
            CHECK(starling_neighbor_allreduce_compressed(ctx, &tin, &tout, &args, &opt));
          else
            CHECK(starling_allreduce_compressed(ctx, &tin, &tout, STARLING_SUM, name.c_str(), &opt));
        };
        call();  // warm-up: state and scratch allocated
        starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
        CHECK(starling_get_stats(ctx, &before));
        std::vector<double> times;
        for (int s = 0; s < steps; ++s) {
          CHECK(starling_barrier(ctx));
          const double t0 = MPI_Wtime();
          call();
          times.push_back(MPI_Wtime() - t0);
        }
        CHECK(starling_get_stats(ctx, &after));
        // Barriers sent messages too; they are a few hundred bytes per step.
        const double wire = static_cast<double>(after.bytes_sent - before.bytes_sent) / steps;
        const double payload =
            static_cast<double>(after.bytes_after_compression - before.bytes_after_compression) / steps;
        const double full =
            static_cast<double>(after.bytes_before_compression - before.bytes_before_compression) / steps;
        double t = Median(times), worst = 0;
        MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
          char ratio[32] = "-";
          if (payload > 0) std::snprintf(ratio, sizeof ratio, "%.1fx", full / payload);
          const bool mib = bytes >= (size_t{1} << 20);
          std::printf("%-18s %-12s %6zu %s %12.2f %14.0f %14.0f %8s\n",
                      neighbor ? "neighbor_allreduce" : "allreduce", c.label, mib ? bytes >> 20 : bytes >> 10,
                      mib ? "MiB" : "KiB", worst * 1e3, wire,
                      c.kind == STARLING_COMPRESS_NONE ? wire : payload, ratio);
          std::fflush(stdout);
        }
      }
    }
  }
  CHECK(starling_context_destroy(ctx));
  MPI_Finalize();
  return 0;
}
