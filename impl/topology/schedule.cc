#include "impl/topology/schedule.h"

#include <cstdint>
#include <utility>

#include "impl/common/error.h"

namespace starling::topology {
namespace {

// Python's a % m for m > 0: never negative.
long long Mod(long long a, long long m) { return ((a % m) + m) % m; }

// floor(log2(n)) for n >= 1, in integers. BlueFog computes int(np.log2(n)); the two
// agree for every n below 2^48, far beyond any int.
int FloorLog2(long long n) {
  int k = 0;
  while (n > 1) {
    n >>= 1;
    ++k;
  }
  return k;
}

// 2^(index mod (k + 1)), the exponential-two distance of step `index`.
long long Exp2Distance(uint64_t index, int k) {
  return 1LL << (index % static_cast<uint64_t>(k + 1));
}

// Out-neighbors of r sorted by clockwise distance (r + 1, r + 2, ... mod size), as
// BlueFog's sorted_send_ranks, self excluded.
std::vector<int> Clockwise(const Graph& g, int r) {
  const std::vector<int> out = g.out_neighbors(r);  // ascending, self excluded
  std::vector<int> order;
  order.reserve(out.size());
  for (int s : out) {
    if (s > r) order.push_back(s);
  }
  for (int s : out) {
    if (s < r) order.push_back(s);
  }
  return order;
}

class DynamicOnePeerSchedule : public Schedule {
 public:
  DynamicOnePeerSchedule(const Graph& g, int rank) : rank_(rank) {
    // BlueFog takes out_degree - 1 as the number of peers, silently assuming a
    // self-loop, and divides by zero when a rank has no other out-neighbor.
    for (int r = 0; r < g.size(); ++r) {
      STARLING_CHECK_ARG(g.has_self_loop(r), "dynamic one-peer schedule: rank ", r,
                         " has no self-loop; every rank of the topology needs one");
      STARLING_CHECK_ARG(!g.out_neighbors(r).empty(), "dynamic one-peer schedule: rank ", r,
                         " has no out-neighbor besides itself");
    }
    own_ = Clockwise(g, rank);
    // Only in-neighbors can ever pick this rank, so only their orders are needed.
    for (int src : g.in_neighbors(rank)) senders_.emplace_back(src, Clockwise(g, src));
  }

  Step Next() override {
    Step step;
    step.send.push_back(own_[index_ % own_.size()]);
    for (const auto& [src, order] : senders_) {
      if (order[index_ % order.size()] == rank_) step.recv.push_back(src);
    }
    ++index_;
    return step;
  }

 private:
  int rank_;
  uint64_t index_ = 0;
  std::vector<int> own_;
  std::vector<std::pair<int, std::vector<int>>> senders_;  // ascending by rank
};

class Exp2MachineSchedule : public Schedule {
 public:
  Exp2MachineSchedule(int machine, int machines)
      : machine_(machine), machines_(machines), exp2_size_(FloorLog2(machines - 1)) {}

  Step Next() override {
    const long long d = Exp2Distance(index_++, exp2_size_);
    return {{static_cast<int>(Mod(machine_ + d, machines_))},
            {static_cast<int>(Mod(machine_ - d, machines_))}};
  }

 private:
  long long machine_, machines_;
  int exp2_size_;
  uint64_t index_ = 0;
};

// Shared layout of the two inner-outer schedules: machine m, local rank l, L ranks per
// machine, M machines. In step i, local rank i mod L of every machine talks to other
// machines; the others talk inside their machine, skipping that rank.
class InnerOuterSchedule : public Schedule {
 public:
  InnerOuterSchedule(int world_size, int local_size, int rank, bool expo2)
      : expo2_(expo2),
        L_(local_size),
        M_(world_size / local_size),
        m_(rank / local_size),
        l_(rank % local_size),
        exp2_out_(M_ > 1 ? FloorLog2(M_ - 1) : 0),
        exp2_in_(FloorLog2(L_ - 2)) {}

  Step Next() override {
    const uint64_t index = index_++;
    const long long out = static_cast<long long>(index % static_cast<uint64_t>(L_));
    Step step;
    if (l_ == out) {
      const long long d = expo2_ ? Exp2Distance(index, exp2_out_) : 1;
      const long long to = Mod(m_ + d, M_) * L_ + l_;
      const long long from = Mod(m_ - d, M_) * L_ + l_;
      // A single machine (ring only) would make this rank its own peer: it idles.
      if (M_ > 1) {
        step.send.push_back(static_cast<int>(to));
        step.recv.push_back(static_cast<int>(from));
      }
      return step;
    }
    if (expo2_) {
      // Distance 2^k along the ring, one further when that would reach or pass `out`.
      long long nd = Exp2Distance(index, exp2_in_);
      if (nd >= Mod(out - l_, L_)) ++nd;
      long long rd = Exp2Distance(index, exp2_in_);
      if (rd >= Mod(l_ - out, L_)) ++rd;
      step.send.push_back(static_cast<int>(m_ * L_ + Mod(l_ + nd, L_)));
      step.recv.push_back(static_cast<int>(m_ * L_ + Mod(l_ - rd, L_)));
    } else {
      long long t = Mod(l_ + 1, L_);
      if (t == out) t = Mod(t + 1, L_);
      long long s = Mod(l_ - 1, L_);
      if (s == out) s = Mod(s - 1, L_);
      step.send.push_back(static_cast<int>(m_ * L_ + t));
      step.recv.push_back(static_cast<int>(m_ * L_ + s));
    }
    return step;
  }

 private:
  bool expo2_;
  long long L_, M_, m_, l_;
  int exp2_out_, exp2_in_;
  uint64_t index_ = 0;
};

void CheckLayout(const char* schedule, int world_size, int local_size, int rank) {
  STARLING_CHECK_ARG(local_size >= 1, schedule, ": local_size must be >= 1, got ", local_size);
  STARLING_CHECK_ARG(world_size >= 1, schedule, ": world_size must be >= 1, got ", world_size);
  STARLING_CHECK_ARG(world_size % local_size == 0, schedule, ": world_size ", world_size,
                     " is not a multiple of local_size ", local_size,
                     " (only homogeneous machines are supported)");
  STARLING_CHECK_ARG(rank >= 0 && rank < world_size, schedule, ": rank ", rank,
                     " is out of range for world_size ", world_size);
}

void CheckInnerOuter(const char* schedule, int world_size, int local_size, int rank) {
  CheckLayout(schedule, world_size, local_size, rank);
  STARLING_CHECK_ARG(local_size > 2, schedule, ": local_size must be > 2, got ", local_size,
                     " (use the dynamic one-peer or exp2 machine schedule instead)");
}

}  // namespace

std::unique_ptr<Schedule> DynamicOnePeer(const Graph& g, int rank) {
  STARLING_CHECK_ARG(rank >= 0 && rank < g.size(), "dynamic one-peer schedule: rank ", rank,
                     " is out of range for a topology of size ", g.size());
  return std::make_unique<DynamicOnePeerSchedule>(g, rank);
}

std::unique_ptr<Schedule> Exp2Machine(int world_size, int local_size, int rank, int local_rank) {
  const char* name = "exp2 machine schedule";
  CheckLayout(name, world_size, local_size, rank);
  STARLING_CHECK_ARG(rank % local_size == local_rank, name, ": local_rank ", local_rank,
                     " does not match rank ", rank, " % local_size ", local_size, " = ",
                     rank % local_size);
  STARLING_CHECK_ARG(world_size > local_size, name, ": needs at least 2 machines, got world_size ",
                     world_size, " / local_size ", local_size, " = ", world_size / local_size);
  return std::make_unique<Exp2MachineSchedule>(rank / local_size, world_size / local_size);
}

std::unique_ptr<Schedule> InnerOuterRing(int world_size, int local_size, int rank) {
  CheckInnerOuter("inner-outer ring schedule", world_size, local_size, rank);
  return std::make_unique<InnerOuterSchedule>(world_size, local_size, rank, false);
}

std::unique_ptr<Schedule> InnerOuterExpo2(int world_size, int local_size, int rank) {
  const char* name = "inner-outer expo2 schedule";
  CheckInnerOuter(name, world_size, local_size, rank);
  // BlueFog dies with OverflowError (int(log2(0))) here.
  STARLING_CHECK_ARG(world_size > local_size, name, ": needs at least 2 machines, got world_size ",
                     world_size, " / local_size ", local_size, " = ", world_size / local_size);
  return std::make_unique<InnerOuterSchedule>(world_size, local_size, rank, true);
}

}  // namespace starling::topology
