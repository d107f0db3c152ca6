// reduce_scatter and alltoall against MPI_Reduce_scatter_block / MPI_Reduce_scatter and
// MPI_Alltoall / MPI_Alltoallv. `bytes` is each rank's input (size() blocks); the
// varying forms give block q (r + q) % 2 == 0 ? 1/2 : 3/2 of the equal share (even
// sizes keep totals; rounded to whole floats).
#include "bench_context.h"

namespace bench {

namespace {

// Floats rank r sends rank q (alltoallv) / block q's floats (reduce_scatterv, r = 0).
int Share(int r, int q, int block) { return (r + q) % 2 == 0 ? block / 2 : block + block / 2; }

}  // namespace

std::vector<Row> RunScatter(BenchContext& b, const std::string& op, const std::vector<size_t>& sizes) {
  std::vector<Row> rows;
  const int p = b.size;
  // The varying forms may send or receive up to 3/2 of the equal share (odd sizes).
  std::vector<float> source(b.a.size() * 2, 0.0f), spill(b.a.size() * 2, 0.0f);
  std::copy(b.a.begin(), b.a.end(), source.begin());
  for (size_t bytes : sizes) {
    const int block = static_cast<int>(bytes / 4 / static_cast<size_t>(p));
    if (block < 2) continue;  // below one float (two for the varying forms) per rank
    std::vector<int> counts(p), displs(p), recv(p), rdispls(p);
    std::vector<int64_t> counts64(p), recv64(p);
    int64_t in_n = 0, out_n = 0;
    const bool varying = op == "reduce_scatterv" || op == "alltoallv";
    for (int q = 0; q < p; ++q) {
      counts[q] = !varying ? block : op == "alltoallv" ? Share(b.rank, q, block) : Share(0, q, block);
      recv[q] = op == "alltoallv" ? Share(q, b.rank, block) : counts[q];
      displs[q] = static_cast<int>(in_n);
      rdispls[q] = static_cast<int>(out_n);
      counts64[q] = counts[q];
      recv64[q] = recv[q];
      in_n += counts[q];
      out_n += recv[q];
    }
    if (op == "reduce_scatter" || op == "reduce_scatterv") out_n = counts[b.rank];
    DLTensor in = Tensor(source.data(), &in_n), out = Tensor(spill.data(), &out_n);
    Pair pair{};
    std::string variant;
    if (op == "reduce_scatter") {
      variant = "sum, equal blocks";
      pair = Compare([&] { MPI_Reduce_scatter_block(source.data(), spill.data(), block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
                     [&] { Check(starling_reduce_scatter(b.ctx, &in, &out, nullptr, STARLING_SUM, nullptr), op.c_str()); },
                     b.budget);
    } else if (op == "reduce_scatterv") {
      variant = "sum, counts";
      pair = Compare(
          [&] { MPI_Reduce_scatter(source.data(), spill.data(), counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
          [&] {
            Check(starling_reduce_scatter(b.ctx, &in, &out, counts64.data(), STARLING_SUM, nullptr), op.c_str());
          },
          b.budget);
    } else if (op == "alltoall") {
      variant = "equal blocks";
      pair = Compare(
          [&] { MPI_Alltoall(source.data(), block, MPI_FLOAT, spill.data(), block, MPI_FLOAT, MPI_COMM_WORLD); },
          [&] { Check(starling_alltoall(b.ctx, &in, &out, nullptr, nullptr, nullptr), op.c_str()); }, b.budget);
    } else {
      variant = "counts";
      pair = Compare(
          [&] {
            MPI_Alltoallv(source.data(), counts.data(), displs.data(), MPI_FLOAT, spill.data(), recv.data(),
                          rdispls.data(), MPI_FLOAT, MPI_COMM_WORLD);
          },
          [&] { Check(starling_alltoall(b.ctx, &in, &out, counts64.data(), recv64.data(), nullptr), op.c_str()); },
          b.budget);
    }
    rows.push_back({op, variant, b.size, bytes, pair});
    Progress(op, bytes);
  }
  return rows;
}

}  // namespace bench
