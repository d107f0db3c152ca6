// starling_bench: Starling's operations against the best raw MPI code for the same data
// movement, measured in one run (alternating batches), at every size from 4 B up.
//
//   mpirun -np 2 starling_bench [--ops allreduce,broadcast,allgather] [--min-bytes 4]
//          [--max-bytes 67108864] [--budget 0.4] [--csv results.csv]
//
// Prints a table (reference us, starling us, ratio, difference) and appends CSV rows.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <starling/starling.h>

#include "bench_util.h"

namespace {

struct Options {
  std::vector<std::string> ops = {"allreduce", "broadcast", "allgather"};
  size_t min_bytes = 4;
  size_t max_bytes = size_t{64} << 20;
  double budget = 0.4;  // seconds per side per size
  std::string csv;
};

void Check(starling_status_t status, const char* what) {
  if (status != STARLING_SUCCESS) {
    std::fprintf(stderr, "%s failed: %s\n", what, starling_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

DLTensor Tensor(float* data, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

struct Bench {
  starling_context_t ctx;
  int rank, size;
  std::vector<float> a, b, gathered;

  bench::Row Allreduce(size_t bytes) {
    int64_t n = static_cast<int64_t>(bytes / 4);
    DLTensor in = Tensor(a.data(), &n), out = Tensor(b.data(), &n);
    auto pair = bench::Compare(
        [&] { MPI_Allreduce(a.data(), b.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
        [&] { Check(starling_allreduce(ctx, &in, &out, STARLING_SUM, nullptr), "allreduce"); }, budget);
    return {"allreduce", "sum", size, bytes, pair};
  }

  bench::Row Broadcast(size_t bytes) {
    int64_t n = static_cast<int64_t>(bytes / 4);
    DLTensor t = Tensor(a.data(), &n);
    auto pair = bench::Compare([&] { MPI_Bcast(a.data(), static_cast<int>(n), MPI_FLOAT, 0, MPI_COMM_WORLD); },
                               [&] { Check(starling_broadcast(ctx, &t, &t, 0, nullptr), "broadcast"); }, budget);
    return {"broadcast", "root 0", size, bytes, pair};
  }

  bench::Row Allgather(size_t bytes) {
    int64_t n = static_cast<int64_t>(bytes / 4), total = n * size;
    DLTensor in = Tensor(a.data(), &n), out = Tensor(gathered.data(), &total);
    auto pair = bench::Compare(
        [&] {
          MPI_Allgather(a.data(), static_cast<int>(n), MPI_FLOAT, gathered.data(), static_cast<int>(n), MPI_FLOAT,
                        MPI_COMM_WORLD);
        },
        [&] { Check(starling_allgather(ctx, &in, &out, nullptr, nullptr), "allgather"); }, budget);
    return {"allgather", "equal sizes", size, bytes, pair};
  }

  double budget = 0.4;
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
                   "usage: starling_bench [--ops allreduce,broadcast,allgather] [--min-bytes N] [--max-bytes N] "
                   "[--budget seconds] [--csv file]\n");
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
  Bench b;
  b.budget = options.budget;
  starling_context_options_t context_options = STARLING_CONTEXT_OPTIONS_INIT;
  context_options.use_host_comm = 1;
  context_options.host_comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  Check(starling_context_create(&context_options, &b.ctx), "context_create");
  starling_rank(b.ctx, &b.rank);
  starling_size(b.ctx, &b.size);
  const size_t max_floats = options.max_bytes / 4 + 1;
  b.a.assign(max_floats, 0.0f);
  b.b.assign(max_floats, 0.0f);
  for (size_t i = 0; i < max_floats; ++i) b.a[i] = static_cast<float>((i * 7 + b.rank) % 13) * 0.25f;
  if (std::find(options.ops.begin(), options.ops.end(), "allgather") != options.ops.end())
    b.gathered.assign(max_floats * b.size, 0.0f);

  const std::map<std::string, std::function<bench::Row(size_t)>> ops = {
      {"allreduce", [&](size_t s) { return b.Allreduce(s); }},
      {"broadcast", [&](size_t s) { return b.Broadcast(s); }},
      {"allgather", [&](size_t s) { return b.Allgather(s); }},
  };
  std::vector<bench::Row> rows;
  for (const std::string& op : options.ops) {
    auto it = ops.find(op);
    if (it == ops.end()) {
      if (b.rank == 0) std::fprintf(stderr, "unknown op '%s'\n", op.c_str());
      continue;
    }
    for (size_t bytes : bench::Sizes(options.min_bytes, options.max_bytes)) {
      rows.push_back(it->second(bytes));
      if (b.rank == 0) {
        std::fprintf(stderr, "\r%-12s %10s done", op.c_str(), bench::HumanBytes(bytes).c_str());
        std::fflush(stderr);
      }
    }
  }
  if (b.rank == 0) std::fprintf(stderr, "\n");
  bench::Report(rows, options.csv, "mpi");
  Check(starling_context_destroy(b.ctx), "context_destroy");
  MPI_Finalize();
  return 0;
}
