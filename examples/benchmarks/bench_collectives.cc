// allreduce, broadcast, allgather against MPI_Allreduce, MPI_Bcast, MPI_Allgather.
#include "bench_context.h"

namespace bench {

std::vector<Row> RunCollectives(BenchContext& b, const std::string& op, const std::vector<size_t>& sizes) {
  std::vector<Row> rows;
  std::vector<float> gathered;
  if (op == "allgather") gathered.assign(b.a.size() * static_cast<size_t>(b.size), 0.0f);
  for (size_t bytes : sizes) {
    int64_t n = static_cast<int64_t>(bytes / 4), total = n * b.size;
    const int count = static_cast<int>(n);
    DLTensor in = Tensor(b.a.data(), &n), out = Tensor(b.b.data(), &n);
    Pair pair{};
    std::string variant;
    if (op == "allreduce") {
      variant = "sum";
      pair = Compare([&] { MPI_Allreduce(b.a.data(), b.b.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
                     [&] { Check(starling_allreduce(b.ctx, &in, &out, STARLING_SUM, nullptr), "allreduce"); },
                     b.budget);
    } else if (op == "broadcast") {
      variant = "root 0";
      pair = Compare([&] { MPI_Bcast(b.a.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD); },
                     [&] { Check(starling_broadcast(b.ctx, &in, &in, 0, nullptr), "broadcast"); }, b.budget);
    } else {
      variant = "equal sizes";
      DLTensor all = Tensor(gathered.data(), &total);
      pair = Compare(
          [&] {
            MPI_Allgather(b.a.data(), count, MPI_FLOAT, gathered.data(), count, MPI_FLOAT, MPI_COMM_WORLD);
          },
          [&] { Check(starling_allgather(b.ctx, &in, &all, nullptr, nullptr), "allgather"); }, b.budget);
    }
    rows.push_back({op, variant, b.size, bytes, pair});
    Progress(op, bytes);
  }
  return rows;
}

}  // namespace bench
