// starling_bench: Starling's operations against the best raw MPI code for the same data
// movement, measured in one run (alternating batches), at every size from 4 B up.
//
//   mpirun -np 2 starling_bench [--ops LIST] [--min-bytes 4] [--max-bytes 67108864]
//                               [--budget 0.4] [--csv results.csv]
//
// LIST (comma-separated, default all): allreduce, broadcast, allgather,
// neighbor_exp2, neighbor_ring, neighbor_dynamic, fusion, win_put, win_accumulate.
// Prints a table (reference us, starling us, ratio, difference) and appends CSV rows.
#include <cstring>
#include <sstream>

#include "bench_context.h"

namespace {

struct Options {
  std::vector<std::string> ops = {"allreduce",        "broadcast", "allgather", "neighbor_exp2", "neighbor_ring",
                                  "neighbor_dynamic", "fusion",    "win_put",   "win_accumulate"};
  size_t min_bytes = 4;
  size_t max_bytes = size_t{64} << 20;
  double budget = 0.4;
  std::string csv;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--ops") {
      o.ops.clear();
      std::stringstream list(next());
      for (std::string op; std::getline(list, op, ',');) o.ops.push_back(op);
    } else if (arg == "--min-bytes") {
      o.min_bytes = std::strtoull(next().c_str(), nullptr, 10);
    } else if (arg == "--max-bytes") {
      o.max_bytes = std::strtoull(next().c_str(), nullptr, 10);
    } else if (arg == "--budget") {
      o.budget = std::atof(next().c_str());
    } else if (arg == "--csv") {
      o.csv = next();
    } else {
      std::fprintf(stderr,
                   "usage: starling_bench [--ops LIST] [--min-bytes N] [--max-bytes N] [--budget seconds] "
                   "[--csv file]\n  LIST: allreduce,broadcast,allgather,neighbor_exp2,neighbor_ring,"
                   "neighbor_dynamic,fusion,win_put,win_accumulate\n");
      std::exit(arg == "--help" || arg == "-h" ? 0 : 2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Options options = Parse(argc, argv);
  bench::BenchContext b;
  b.budget = options.budget;
  starling_context_options_t context_options = STARLING_CONTEXT_OPTIONS_INIT;
  context_options.use_host_comm = 1;
  context_options.host_comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  bench::Check(starling_context_create(&context_options, &b.ctx), "context_create");
  starling_rank(b.ctx, &b.rank);
  starling_size(b.ctx, &b.size);
  const size_t max_floats = options.max_bytes / 4 + 1;
  b.a.assign(max_floats, 0.0f);
  b.b.assign(max_floats, 0.0f);
  for (size_t i = 0; i < max_floats; ++i) b.a[i] = static_cast<float>((i * 7 + b.rank) % 13) * 0.25f;

  const std::vector<size_t> sizes = bench::Sizes(options.min_bytes, options.max_bytes);
  std::vector<size_t> window_sizes;  // windows: 4 KiB and up
  for (size_t s : sizes)
    if (s >= 4096) window_sizes.push_back(s);
  std::vector<bench::Row> rows;
  for (const std::string& op : options.ops) {
    std::vector<bench::Row> more;
    if (op == "allreduce" || op == "broadcast" || op == "allgather") {
      more = bench::RunCollectives(b, op, sizes);
    } else if (op.rfind("neighbor_", 0) == 0) {
      more = bench::RunNeighbor(b, op.substr(std::strlen("neighbor_")), sizes);
    } else if (op == "fusion") {
      more = bench::RunFusion(b);
    } else if (op == "win_put" || op == "win_accumulate") {
      more = bench::RunWindows(b, op, window_sizes);
    } else if (b.rank == 0) {
      std::fprintf(stderr, "unknown op '%s'\n", op.c_str());
    }
    rows.insert(rows.end(), more.begin(), more.end());
  }
  if (b.rank == 0) std::fprintf(stderr, "\n");
  bench::Report(rows, options.csv, "reference");
  bench::Check(starling_context_destroy(b.ctx), "context_destroy");
  MPI_Finalize();
  return 0;
}
