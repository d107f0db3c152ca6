// One-sided windows against raw MPI send/recv moving the same bytes over the same
// exponential-2 graph: put + update against Isend/Irecv + the same average;
// accumulate against Isend/Irecv + adding into the buffer.
//
// put + update sends the tensor that the previous update wrote, so its reference does
// too: it averages into a second buffer and sends that one next (double buffering, the
// fastest raw form). Sending an unchanged buffer instead would flatter the reference:
// with Open MPI's single-copy transfers (CMA) the receiver's cache then still holds
// the data, so nothing really crosses between the cores.
#include <algorithm>

#include "bench_context.h"

namespace bench {
namespace {

std::vector<int> Neighbors(starling_context_t ctx, bool in) {
  int count = 0;
  (in ? starling_in_neighbors : starling_out_neighbors)(ctx, nullptr, 0, &count);
  std::vector<int> v(static_cast<size_t>(count));
  if (count > 0) Check((in ? starling_in_neighbors : starling_out_neighbors)(ctx, v.data(), count, &count), "nbrs");
  return v;
}

}  // namespace

std::vector<Row> RunWindows(BenchContext& b, const std::string& op, const std::vector<size_t>& sizes) {
  starling_topology_t topo;
  Check(starling_topology_exponential_two(b.size, &topo), "exp2");
  Check(starling_set_topology(b.ctx, topo, 0), "set_topology");
  starling_topology_free(topo);
  const std::vector<int> in = Neighbors(b.ctx, true), out = Neighbors(b.ctx, false);
  std::vector<std::vector<float>> scratch(in.size(), std::vector<float>(b.a.size()));
  std::vector<float> buffer(b.a.size(), 0.0f);
  std::vector<Row> rows;
  const bool accumulate = op == "win_accumulate";
  for (size_t bytes : sizes) {
    int64_t n = static_cast<int64_t>(bytes / 4);
    const int count = static_cast<int>(n);
    std::vector<float> mine(static_cast<size_t>(n), 1.0f);
    DLTensor t = Tensor(mine.data(), &n);
    std::vector<float> raw_x[2] = {mine, mine};  // the reference's own double buffer
    int current = 0;
    starling_window_t win;
    Check(starling_window_create(b.ctx, &t, "bench", 1, &win), "window_create");
    auto raw = [&] {
      std::vector<MPI_Request> reqs;
      for (size_t j = 0; j < in.size(); ++j) {
        reqs.emplace_back();
        MPI_Irecv(scratch[j].data(), count, MPI_FLOAT, in[j], 9, MPI_COMM_WORLD, &reqs.back());
      }
      const float* send = accumulate ? mine.data() : raw_x[current].data();
      for (int dst : out) {
        reqs.emplace_back();
        MPI_Isend(send, count, MPI_FLOAT, dst, 9, MPI_COMM_WORLD, &reqs.back());
      }
      MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
      if (accumulate) {
        float* __restrict acc = buffer.data();
        for (const auto& r : scratch) {
          const float* __restrict rj = r.data();
          for (int64_t i = 0; i < n; ++i) acc[i] += rj[i];
        }
      } else {
        std::vector<float*> r;
        for (auto& v : scratch) r.push_back(v.data());
        const float w = 1.0f / (in.size() + 1);
        Combine(raw_x[1 - current].data(), raw_x[current].data(), r, w, w, static_cast<size_t>(n));
        current = 1 - current;
      }
    };
    auto ours = [&] {
      if (accumulate) {
        Check(starling_window_accumulate(win, &t, nullptr), "window_accumulate");
      } else {
        Check(starling_window_put(win, &t, nullptr), "window_put");
        Check(starling_window_update(win, nullptr), "window_update");
      }
    };
    rows.push_back({accumulate ? "win_accumulate" : "win_put + update", "exp2", b.size, bytes,
                    Compare(raw, ours, b.budget)});
    Check(starling_window_free(win), "window_free");
    Progress(op, bytes);
  }
  return rows;
}

}  // namespace bench
