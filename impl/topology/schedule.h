// Dynamic schedules: BlueFog's Get*SendRecvRanks generators as iterators. Every rank
// owns one schedule and advances it once per step, in lockstep with the others; step i
// (counting from 0) yields the same sets as BlueFog's generator on its i-th next().
#pragma once

#include <memory>
#include <vector>

#include "impl/topology/graph.h"

namespace starling::topology {

// The ranks (or machine ids, for Exp2Machine) this rank sends to and receives from in
// one step, ascending.
struct Step {
  std::vector<int> send;
  std::vector<int> recv;
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual Step Next() = 0;
};

// GetDynamicOnePeerSendRecvRanks: one out-neighbor per step, in clockwise order.
// Every rank of g needs a self-loop and at least one other out-neighbor.
std::unique_ptr<Schedule> DynamicOnePeer(const Graph& g, int rank);
// GetExp2DynamicSendRecvMachineRanks: yields machine ids. Needs >= 2 machines,
// world_size % local_size == 0 and rank % local_size == local_rank.
std::unique_ptr<Schedule> Exp2Machine(int world_size, int local_size, int rank, int local_rank);
// GetInnerOuterRingDynamicSendRecvRanks. Needs world_size % local_size == 0 and
// local_size > 2.
std::unique_ptr<Schedule> InnerOuterRing(int world_size, int local_size, int rank);
// GetInnerOuterExpo2DynamicSendRecvRanks. As InnerOuterRing, plus >= 2 machines.
std::unique_ptr<Schedule> InnerOuterExpo2(int world_size, int local_size, int rank);

// Pairwise averaging over fast links (fast_pairs.cc): round-robin pairs, a pair whose
// link (the larger of link_seconds[i][j] and [j][i]) exceeds threshold_seconds sitting
// the step out. link_seconds: world_size x world_size, row-major; every rank passes the
// same. Refuses a threshold under which the fast links leave the job disconnected.
std::unique_ptr<Schedule> FastPairs(int world_size, int rank, const std::vector<double>& link_seconds,
                                    double threshold_seconds);

}  // namespace starling::topology
