// starling_bench: Starling's operations against the best raw MPI code for the same data
// movement, measured in one run (alternating batches), at every size from 4 B up.
//
//   mpirun -np 2 starling_bench [--ops LIST] [--min-bytes 4] [--max-bytes 67108864]
//                               [--budget 0.4] [--csv results.csv]
//                               [--device cpu|cuda] [--gpu-path auto|staged|nccl]
//                               [--chunk-bytes N]
//
// LIST (comma-separated, default all): allreduce, broadcast, allgather, reduce_scatter,
// reduce_scatterv, alltoall, alltoallv, neighbor_exp2, neighbor_ring, neighbor_dynamic, fusion, win_put, win_accumulate.
// With --device cuda (bench_gpu.cc): allreduce, broadcast, neighbor_ring,
// neighbor_exp2, combine, on CUDA tensors against hand-written staging or raw NCCL.
// Prints a table (reference us, starling us, ratio, difference) and appends CSV rows.
#include <cstring>
#include <sstream>

#include "bench_context.h"
#include "bench_gpu.h"

namespace {

struct Options {
  std::vector<std::string> ops = {"allreduce",      "broadcast",        "allgather",      "reduce_scatter",
                                  "reduce_scatterv", "alltoall",        "alltoallv",      "neighbor_exp2",
                                  "neighbor_ring",   "neighbor_dynamic", "fusion",         "win_put",
                                  "win_accumulate"};
  size_t min_bytes = 4;
  size_t max_bytes = size_t{64} << 20;
  double budget = 0.4;
  std::string csv;
  bool ops_given = false;
  std::string device = "cpu";
  std::string gpu_path;    // --gpu-path: becomes STARLING_GPU_PATH (empty: the environment's)
  size_t chunk_bytes = 0;  // --chunk-bytes: becomes STARLING_GPU_CHUNK_BYTES (0: the environment's)
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: starling_bench [--ops LIST] [--min-bytes N] [--max-bytes N] [--budget seconds] "
               "[--csv file]\n                      [--device cpu|cuda] [--gpu-path auto|staged|nccl] "
               "[--chunk-bytes N]\n  LIST: allreduce,broadcast,allgather,reduce_scatter,reduce_scatterv,alltoall,alltoallv,neighbor_exp2,neighbor_ring,"
               "neighbor_dynamic,fusion,win_put,win_accumulate\n  with --device cuda: "
               "allreduce,broadcast,neighbor_ring,neighbor_exp2,combine\n");
}

// Thrown by Parse to end the program with this status once MPI is finalized: under
// mpirun, a rank that exits without MPI_Finalize (even for --help) makes Open MPI print
// its abort text.
struct Stop {
  int status;
};

// Every rank parses the same command line and so reaches the same decision; only rank
// 0 (speak) prints, so that --help under mpirun prints once.
Options Parse(int argc, char** argv, bool speak) {
  Options o;
  auto bad = [speak](const std::string& message) {
    if (speak) {
      std::fprintf(stderr, "starling_bench: %s\n", message.c_str());
      Usage(stderr);
    }
    throw Stop{2};
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) bad(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--ops") {
      o.ops.clear();
      o.ops_given = true;
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
    } else if (arg == "--device") {
      o.device = next();
    } else if (arg == "--gpu-path") {
      o.gpu_path = next();
    } else if (arg == "--chunk-bytes") {
      o.chunk_bytes = std::strtoull(next().c_str(), nullptr, 10);
    } else if (arg == "--help" || arg == "-h") {
      if (speak) Usage(stdout);
      throw Stop{0};
    } else {
      bad("unknown option '" + arg + "'");
    }
  }
  if (o.device != "cpu" && o.device != "cuda") bad("--device is cpu or cuda");
  if (o.device != "cuda" && (!o.gpu_path.empty() || o.chunk_bytes != 0))
    bad("--gpu-path and --chunk-bytes need --device cuda");
  if (!o.gpu_path.empty() && o.gpu_path != "auto" && o.gpu_path != "staged" && o.gpu_path != "nccl")
    bad("--gpu-path is auto, staged or nccl");
  if (o.device == "cuda" && !o.ops_given) o.ops = bench::GpuFamilies();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int world_rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  Options options;
  try {
    options = Parse(argc, argv, world_rank == 0);
  } catch (const Stop& stop) {
    MPI_Finalize();
    return stop.status;
  }
  if (options.device == "cuda") {
    // The context reads STARLING_GPU_PATH and STARLING_GPU_CHUNK_BYTES once per process,
    // at its creation: the options become the variables before that.
    if (!options.gpu_path.empty()) setenv("STARLING_GPU_PATH", options.gpu_path.c_str(), 1);
    if (options.chunk_bytes != 0) setenv("STARLING_GPU_CHUNK_BYTES", std::to_string(options.chunk_bytes).c_str(), 1);
  }
  bench::BenchContext b;
  b.budget = options.budget;
  starling_context_options_t context_options = STARLING_CONTEXT_OPTIONS_INIT;
  context_options.use_host_comm = 1;
  context_options.host_comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  bench::Check(starling_context_create(&context_options, &b.ctx), "context_create");
  starling_rank(b.ctx, &b.rank);
  starling_size(b.ctx, &b.size);
  const std::vector<size_t> sizes = bench::Sizes(options.min_bytes, options.max_bytes);
  if (options.device == "cuda") {
    bench::GpuOptions gpu;
    gpu.ops = options.ops;
    gpu.csv = options.csv;
    // The chunk the context uses (it already accepted the variable, else it failed).
    if (const char* chunk = std::getenv("STARLING_GPU_CHUNK_BYTES"); chunk && *chunk)
      gpu.chunk_bytes = static_cast<size_t>(std::strtod(chunk, nullptr));
    const int rc = bench::RunGpu(b, gpu, sizes);
    bench::Check(starling_context_destroy(b.ctx), "context_destroy");
    MPI_Finalize();
    return rc;
  }
  const size_t max_floats = options.max_bytes / 4 + 1;
  b.a.assign(max_floats, 0.0f);
  b.b.assign(max_floats, 0.0f);
  for (size_t i = 0; i < max_floats; ++i) b.a[i] = static_cast<float>((i * 7 + b.rank) % 13) * 0.25f;

  std::vector<size_t> window_sizes;  // windows: 4 KiB and up
  for (size_t s : sizes)
    if (s >= 4096) window_sizes.push_back(s);
  std::vector<bench::Row> rows;
  for (const std::string& op : options.ops) {
    std::vector<bench::Row> more;
    if (op == "allreduce" || op == "broadcast" || op == "allgather") {
      more = bench::RunCollectives(b, op, sizes);
    } else if (op == "reduce_scatter" || op == "reduce_scatterv" || op == "alltoall" || op == "alltoallv") {
      more = bench::RunScatter(b, op, sizes);
    } else if (op.rfind("neighbor_", 0) == 0) {
      more = bench::RunNeighbor(b, op.substr(std::strlen("neighbor_")), sizes);
    } else if (op == "fusion") {
      more = bench::RunFusion(b);
    } else if (op == "win_put" || op == "win_accumulate") {
      more = bench::RunWindows(b, op, window_sizes);
    } else if (b.rank == 0) {
      std::fprintf(stderr, "unknown op '%s'\n", op.c_str());
    }
    bench::ProgressEnd();  // one finished line per operation, in order
    rows.insert(rows.end(), more.begin(), more.end());
  }
  bench::Report(rows, options.csv, "reference");
  bench::Check(starling_context_destroy(b.ctx), "context_destroy");
  MPI_Finalize();
  return 0;
}
