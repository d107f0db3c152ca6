// Pairwise averaging over fast links only (issue 25: straggler-aware topology). Step t
// pairs the ranks as round t of a round-robin tournament (the circle method); a pair
// whose link is slower than the threshold in either direction sits the step out.
// Pairs are symmetric, so averaging with weight 1/2 (1 for a rank alone) gives a
// symmetric, hence doubly stochastic, mixing matrix at every step; skipping a pair
// keeps it so (both rows become the identity's). Every rank derives the same rounds
// from the same matrix, so the job needs no agreement beyond sharing that matrix.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "impl/common/error.h"
#include "impl/topology/schedule.h"

namespace starling::topology {
namespace {

constexpr const char* kName = "fast-link pair schedule";

// The circle method over m players (m even): player m - 1 stays put, the others
// rotate. In round r (0 <= r < m - 1), player p meets CirclePartner(m, r, p).
int CirclePartner(int m, int r, int p) {
  if (p == m - 1) return r;
  if (p == r) return m - 1;
  return ((2 * r - p) % (m - 1) + (m - 1)) % (m - 1);
}

int Find(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

class FastPairsSchedule : public Schedule {
 public:
  explicit FastPairsSchedule(std::vector<int> partners) : partners_(std::move(partners)) {}

  Step Next() override {
    Step step;
    if (!partners_.empty()) {
      const int peer = partners_[index_ % partners_.size()];
      if (peer >= 0) {
        step.send.push_back(peer);
        step.recv.push_back(peer);
      }
    }
    ++index_;
    return step;
  }

 private:
  std::vector<int> partners_;  // this rank's peer in each kept round, -1: none
  uint64_t index_ = 0;
};

}  // namespace

std::unique_ptr<Schedule> FastPairs(int world_size, int rank, const std::vector<double>& link_seconds,
                                    double threshold_seconds) {
  STARLING_CHECK_ARG(world_size >= 1, kName, ": world_size must be >= 1, got ", world_size);
  STARLING_CHECK_ARG(rank >= 0 && rank < world_size, kName, ": rank ", rank, " is out of range for world_size ",
                     world_size);
  const size_t n = static_cast<size_t>(world_size);
  STARLING_CHECK_ARG(link_seconds.size() == n * n, kName, ": link_seconds has ", link_seconds.size(),
                     " figures; a job of ", world_size, " ranks needs ", n * n, " (one row per rank)");
  STARLING_CHECK_ARG(std::isfinite(threshold_seconds) && threshold_seconds > 0, kName, ": threshold_seconds is ",
                     threshold_seconds, "; give a positive number of seconds");
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      const double v = link_seconds[i * n + j];
      STARLING_CHECK_ARG(i == j || (std::isfinite(v) && v >= 0), kName, ": link_seconds[", i, "][", j, "] is ", v,
                         "; give a finite number of seconds >= 0");
    }
  auto fast = [&](int i, int j) {
    return std::max(link_seconds[i * n + j], link_seconds[j * n + i]) <= threshold_seconds;
  };
  // Refuse a threshold that cuts the job apart: averaging would never mix the parts.
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (int i = 0; i < world_size; ++i)
    for (int j = i + 1; j < world_size; ++j)
      if (fast(i, j)) parent[Find(parent, i)] = Find(parent, j);
  std::vector<std::vector<int>> groups(n);
  for (int i = 0; i < world_size; ++i) groups[Find(parent, i)].push_back(i);
  std::string parts;
  int count = 0;
  for (const auto& g : groups) {
    if (g.empty()) continue;
    ++count;
    std::string list;
    for (int r : g) list += (list.empty() ? "" : ", ") + std::to_string(r);
    parts += (parts.empty() ? "{" : " {") + list + "}";
  }
  STARLING_CHECK_ARG(count == 1, kName, ": the links at or under threshold_seconds ", threshold_seconds,
                     " split the job into ", count, " groups that would never mix: ", parts,
                     "; raise the threshold or leave such ranks out of the job");
  // The rounds in which at least one pair of the job is fast, in tournament order.
  const int m = world_size % 2 == 0 ? world_size : world_size + 1;  // odd: a bye
  std::vector<int> partners;
  for (int r = 0; r + 1 < m; ++r) {
    bool any = false;
    for (int p = 0; p < world_size && !any; ++p) {
      const int q = CirclePartner(m, r, p);
      any = q < world_size && fast(p, q);
    }
    if (!any) continue;
    const int q = CirclePartner(m, r, rank);
    partners.push_back(q < world_size && fast(rank, q) ? q : -1);
  }
  return std::make_unique<FastPairsSchedule>(std::move(partners));
}

}  // namespace starling::topology
