// starling_context_grow under `mpirun --with-ft ulfm` (Open MPI 5); run by
// run_grow_test.py. The same program is started again by the grow: the new process
// enters the context inside starling_context_create and checks it joined.
//
//   grow_program <scenario> [--expect-env=NAME=VALUE...]
//   replace     rank 1 dies (SIGKILL); the survivors get PEER_FAILED, repair, and grow
//               by one process placed at rank 1 (the dead rank's place)
//   append      no failure: grow by one process at the end (the default place)
//   replace_ring  as replace, with a ring topology given to the grow
//   replace_then_fail  as replace, then the last rank dies; every member (the newcomer
//               too) repairs, checks an allreduce, and the job must still end with
//               mpirun's status 0 (a newcomer that saw a failure must exit cleanly)
//   replace_two rank 1 and the last rank die; the survivors grow by two processes
//               placed at ranks {size - 1, 1} (started in that order)
//   resize      no failure, 4 ranks: ranks 1 and 3 leave (starling_context_shrink),
//               the 2 that stay check exact results, then grow by 3 at the end (5);
//               the ranks that left print LEFT and exit 0 at once
//   shrink_then_fail  no grow, 4 ranks: the last rank leaves; then the last of the 3 that
//               stay dies (SIGKILL); the 2 survivors get PEER_FAILED, repair, check an
//               allreduce, and mpirun must still exit 0
// Then every member (survivors and the newcomers) checks exact results over the grown
// context: allreduce, neighbor_allreduce, a window created after the grow (put +
// update), and the newcomer pulls the "parameters" of rank 0 with one broadcast and
// must hold them bit for bit. Lines for the driver:
//   MEMBER rank=R joined=J ok=1 grow_s=D shrink_s=D size=N
//   MEMBER rank=R joined=J ok=0 reason=...
//   LEFT rank=R shrink_s=D   (resize: a rank that left)
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <starling/starling.h>

#include "fault_support.h"

namespace {

using fault_support::Expect;
using fault_support::Failure;
using fault_support::InNeighbors;
using fault_support::Mono;
using fault_support::Tensor;

// The parameters rank 0 holds: not a simple pattern, so a partial copy shows.
double Parameter(size_t i) { return std::sin(0.37 * static_cast<double>(i) + 1.0) * 1e3 + 1.0 / 3.0; }

// Exact results over the grown context (x_r = r + 1 on rank r).
void CheckGrown(starling_context_t ctx, int joined, const char* after = "the grow") {
  // Members and newcomers alike: the shared-memory probe ran again over the new ranks.
  fault_support::ExpectShmProbedAgain(ctx, after);
  int rank = 0, size = 0;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  // The newcomer pulls rank 0's parameters in one call; the others keep theirs.
  Tensor params(4099);
  if (!joined) {
    for (size_t i = 0; i < params.data.size(); ++i) params.data[i] = rank == 0 ? Parameter(i) : -1.0;
  }
  Expect(starling_broadcast(ctx, &params.t, &params.t, 0, "pull parameters") == STARLING_SUCCESS, "broadcast");
  for (size_t i = 0; i < params.data.size(); ++i)
    Expect(params.data[i] == Parameter(i), "parameter " + std::to_string(i) + " differs from rank 0's");

  Tensor x(1000, rank + 1.0), sum(1000);
  Expect(starling_allreduce(ctx, &x.t, &sum.t, STARLING_SUM, "after grow") == STARLING_SUCCESS, "allreduce");
  const double expected_sum = size * (size + 1) / 2.0;
  for (double v : sum.data)
    Expect(v == expected_sum, "allreduce sum " + std::to_string(v) + " != " + std::to_string(expected_sum));
  const std::vector<int> in = InNeighbors(ctx);
  double expected = rank + 1.0;
  for (int r : in) expected += r + 1.0;
  expected /= static_cast<double>(in.size() + 1);
  Tensor avg(1000);
  Expect(starling_neighbor_allreduce(ctx, &x.t, &avg.t, nullptr) == STARLING_SUCCESS, "neighbor_allreduce");
  for (double v : avg.data)
    Expect(std::fabs(v - expected) <= 1e-12 * expected,
           "neighbor_allreduce " + std::to_string(v) + " != " + std::to_string(expected));
  // A window made after the grow: the newcomer takes part in its creation.
  Tensor w(500, 0.0);
  starling_window_t win = nullptr;
  Expect(starling_window_create(ctx, &w.t, "grown", 0, &win) == STARLING_SUCCESS, "window_create");
  w.Fill(rank + 1.0);
  Expect(starling_window_put(win, &w.t, nullptr) == STARLING_SUCCESS, "window_put");
  Expect(starling_barrier(ctx) == STARLING_SUCCESS, "barrier");
  Expect(starling_window_update(win, nullptr) == STARLING_SUCCESS, "window_update");
  for (double v : w.data)
    Expect(std::fabs(v - expected) <= 1e-12 * expected,
           "window_update " + std::to_string(v) + " != " + std::to_string(expected));
  Expect(starling_window_free(win) == STARLING_SUCCESS, "window_free");
}

// resize, 4 ranks: ranks 1 and 3 leave. Those print LEFT and return true (exit now);
// the two that stay are renumbered 0 -> 0, 2 -> 1, check exact results over the shrunk
// context, and return false (*rank and *size updated) to grow to 5.
double g_shrink_s = 0.0;  // how long the shrink took here

bool ShrinkAndLeave(starling_context_t ctx, int* rank, int* size) {
  Expect(*size == 4, "resize runs at 4 ranks");
  const int leaving[2] = {1, 3};
  starling_shrink_options_t options = STARLING_SHRINK_OPTIONS_INIT;
  options.count = 2;
  options.ranks = leaving;
  int old_to_new[4] = {}, left[2] = {};
  starling_shrink_result_t result = STARLING_SHRINK_RESULT_INIT;
  result.old_to_new = old_to_new;
  result.old_to_new_capacity = 4;
  result.left = left;
  result.left_capacity = 2;
  const double start = Mono();
  Expect(starling_context_shrink(ctx, &options, &result) == STARLING_SUCCESS,
         std::string("shrink: ") + starling_last_error());
  g_shrink_s = Mono() - start;
  Expect(result.old_rank == *rank && result.old_size == 4 && result.new_size == 2, "shrink sizes");
  Expect(old_to_new[0] == 0 && old_to_new[1] == -1 && old_to_new[2] == 1 && old_to_new[3] == -1, "shrink old_to_new");
  Expect(left[0] == 1 && left[1] == 3, "shrink left");
  if (*rank == 1 || *rank == 3) {
    Expect(result.new_rank == -1, "a leaving rank's new_rank");
    // The context is left: calls fail with INVALID_USAGE, destroy is local.
    Tensor x(10, 1.0), y(10);
    Expect(starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "after leaving") == STARLING_ERR_INVALID_USAGE,
           "an allreduce after leaving did not fail with INVALID_USAGE");
    Expect(std::strstr(starling_last_error(), "left the context") != nullptr,
           std::string("the error after leaving: ") + starling_last_error());
    Expect(starling_context_destroy(ctx) == STARLING_SUCCESS, "destroy after leaving");
    std::printf("LEFT rank=%d shrink_s=%.3f\n", *rank, g_shrink_s);
    std::fflush(stdout);
    return true;
  }
  Expect(result.new_rank == *rank / 2, "a staying rank's new_rank");
  starling_rank(ctx, rank);
  starling_size(ctx, size);
  Expect(*rank == result.new_rank && *size == 2, "rank/size after shrink");
  CheckGrown(ctx, /*joined=*/0, "the shrink");
  return false;
}

// shrink_then_fail, 4 ranks: returns the process's exit status.
int ShrinkThenFail(starling_context_t ctx, int first_rank) {
  starling_shrink_result_t result = STARLING_SHRINK_RESULT_INIT;
  Expect(starling_context_shrink(ctx, nullptr, &result) == STARLING_SUCCESS,  // the last rank leaves
         std::string("shrink: ") + starling_last_error());
  if (result.new_rank < 0) {
    Expect(first_rank == 3, "rank " + std::to_string(first_rank) + " left");
    Expect(starling_context_destroy(ctx) == STARLING_SUCCESS, "destroy after leaving");
    std::printf("LEFT rank=%d\n", first_rank);
    std::fflush(stdout);
    return 0;
  }
  int s = starling_barrier(ctx);
  if (result.new_rank == 2) {
    std::fflush(stdout);
    raise(SIGKILL);
  }
  Tensor x(10, 1.0), y(10);
  for (int i = 0; i < 100000 && s == STARLING_SUCCESS; ++i)
    s = starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "until the failure");
  Expect(s == STARLING_ERR_PEER_FAILED, "the allreduce did not fail with PEER_FAILED: " + std::to_string(s));
  Expect(starling_context_repair(ctx, nullptr, nullptr) == STARLING_SUCCESS, "repair after the shrink");
  int rank = 0, size = 0;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  Expect(size == 2, "size after the repair: " + std::to_string(size));
  Tensor one(10, rank + 1.0), sum(10);
  Expect(starling_allreduce(ctx, &one.t, &sum.t, STARLING_SUM, "after the repair") == STARLING_SUCCESS,
         "allreduce after the repair");
  Expect(sum.data[0] == 3.0, "allreduce sum after the repair: " + std::to_string(sum.data[0]));
  Expect(starling_context_destroy(ctx) == STARLING_SUCCESS, "destroy");
  std::printf("MEMBER rank=%d first_rank=%d joined=0 ok=1 size=%d\n", rank, first_rank, size);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "append";
  starling_context_t ctx = nullptr;
  if (starling_context_create(nullptr, &ctx) != STARLING_SUCCESS) {
    std::printf("MEMBER rank=-1 joined=-1 ok=0 reason=context_create: %s\n", starling_last_error());
    return 1;
  }
  int rank = 0, size = 0, joined = 0;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  starling_joined(ctx, &joined);
  const int first_rank = rank;
  double grow_s = 0.0;
  try {
    // --expect-env=NAME=VALUE (newcomers get the same arguments): every member must see
    // NAME set to VALUE, also those a grow started (starlingrun -x passes it on).
    for (int i = 2; i < argc; ++i) {
      const std::string arg = argv[i], flag = "--expect-env=";
      const size_t equals = arg.rfind(flag, 0) == 0 ? arg.find('=', flag.size()) : std::string::npos;
      Expect(equals != std::string::npos, "bad argument " + arg);
      const std::string name = arg.substr(flag.size(), equals - flag.size());
      const char* value = std::getenv(name.c_str());
      Expect(value != nullptr && arg.substr(equals + 1) == value,
             "environment: " + name + " is " + (value != nullptr ? std::string("'") + value + "'" : "unset"));
    }
    if (!joined) {
      Expect(scenario == "append" || scenario == "replace" || scenario == "replace_ring" ||
                 scenario == "replace_two" || scenario == "replace_then_fail" || scenario == "resize" ||
                 scenario == "shrink_then_fail",
             "unknown scenario");
      int tolerant = 0;
      Expect(starling_fault_tolerant(ctx, &tolerant) == STARLING_SUCCESS && tolerant == 1, "fault_tolerant");
      if (scenario == "resize" && ShrinkAndLeave(ctx, &rank, &size)) return 0;
      if (scenario == "shrink_then_fail") return ShrinkThenFail(ctx, first_rank);
      const bool replace = scenario != "append" && scenario != "resize";
      if (replace) {
        // The victims die once out of a barrier (as in replace_then_fail below): a rank
        // killed as soon as its creation returned failed another rank's creation.
        int s = starling_barrier(ctx);
        if (rank == 1 || (scenario == "replace_two" && rank == size - 1)) {
          std::fflush(stdout);
          raise(SIGKILL);
        }
        Tensor x(1000, 1.0), y(1000);
        for (int i = 0; i < 1000 && s == STARLING_SUCCESS; ++i)
          s = starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "until the failure");
        Expect(s == STARLING_ERR_PEER_FAILED, "the allreduce did not fail with PEER_FAILED: " + std::to_string(s));
        Expect(starling_context_repair(ctx, nullptr, nullptr) == STARLING_SUCCESS, "repair");
        // Two deaths may be reported apart: repair until both are gone.
        const int survivors = scenario == "replace_two" ? size - 2 : size - 1;
        for (int i = 0; i < 500; ++i) {
          int now = 0;
          starling_size(ctx, &now);
          if (now == survivors) break;
          if (starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "until the second failure") != STARLING_SUCCESS)
            Expect(starling_context_repair(ctx, nullptr, nullptr) == STARLING_SUCCESS, "second repair");
          else
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      int current = 0;
      starling_size(ctx, &current);
      starling_grow_options_t options = STARLING_GROW_OPTIONS_INIT;
      const int two = scenario == "replace_two" ? 2 : scenario == "resize" ? 3 : 1;
      const int places[2] = {two == 2 ? size - 1 : 1, 1};  // the grown context has `size` ranks again
      options.count = two;
      if (replace) options.ranks = places;
      starling_topology_t ring = nullptr;
      if (scenario == "replace_ring") {
        Expect(starling_topology_ring(current + 1, STARLING_RING_BIDIRECTIONAL, &ring) == STARLING_SUCCESS, "ring");
        options.topology = ring;
      }
      int old_to_new[64], newcomers[4] = {};
      starling_grow_result_t result = STARLING_GROW_RESULT_INIT;
      result.old_to_new = old_to_new;
      result.old_to_new_capacity = 64;
      result.joined = newcomers;
      result.joined_capacity = 4;
      const double start = Mono();
      Expect(starling_context_grow(ctx, &options, &result) == STARLING_SUCCESS, "grow");
      grow_s = Mono() - start;
      if (ring != nullptr) starling_topology_free(ring);
      Expect(result.old_size == current && result.new_size == current + two, "grow sizes");
      for (int i = 0; i < two; ++i)
        Expect(newcomers[i] == (replace ? places[i] : current + i),
               "newcomer " + std::to_string(i) + " at " + std::to_string(newcomers[i]));
      // The current ranks fill the places left, in their order.
      std::vector<int> free_places;
      for (int r = 0; r < current + two; ++r)
        if (!replace || std::find(places, places + two, r) == places + two) free_places.push_back(r);
      for (int r = 0; r < current; ++r)
        Expect(old_to_new[r] == free_places[static_cast<size_t>(r)],
               "old rank " + std::to_string(r) + " -> " + std::to_string(old_to_new[r]));
      const int grown_size = current + two;
      starling_rank(ctx, &rank);
      starling_size(ctx, &size);
      Expect(rank == result.new_rank && size == grown_size, "rank/size after grow");
    } else {
      const bool placed = scenario == "append"   ? rank == size - 1
                          : scenario == "resize" ? rank >= 2
                          : scenario == "replace_two" ? (rank == 1 || rank == size - 1) : rank == 1;
      Expect(placed, "newcomer's rank " + std::to_string(rank));
    }
    if (scenario == "replace_ring") {
      const std::vector<int> in = InNeighbors(ctx);
      Expect(in.size() == (size > 2 ? 2u : 1u), "ring in-neighbors after grow");
    }
    CheckGrown(ctx, joined);
    if (scenario == "replace_then_fail") {
      // The last rank (of the first job) dies after the grow; every member, the
      // newcomer too, repairs and computes exactly, then the job must end with status 0.
      // It dies once it has left a barrier: a rank leaving a collective may kill itself
      // while others are still inside it (it died right after its part of CheckGrown's
      // window_free once, failing another rank's window_free), so the others expect the
      // failure from that barrier on.
      int s = starling_barrier(ctx);
      if (rank == size - 1) {
        std::fflush(stdout);
        raise(SIGKILL);
      }
      Tensor x(10, rank + 1.0), y(10);
      for (int i = 0; i < 100000 && s == STARLING_SUCCESS; ++i)
        s = starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "until the second failure");
      Expect(s == STARLING_ERR_PEER_FAILED, "the allreduce did not fail with PEER_FAILED: " + std::to_string(s));
      Expect(starling_context_repair(ctx, nullptr, nullptr) == STARLING_SUCCESS, "repair after the grow");
      starling_rank(ctx, &rank);
      starling_size(ctx, &size);
      Tensor one(10, rank + 1.0), sum(10);
      Expect(starling_allreduce(ctx, &one.t, &sum.t, STARLING_SUM, "after the second repair") == STARLING_SUCCESS,
             "allreduce after the second repair");
      Expect(sum.data[0] == size * (size + 1) / 2.0, "allreduce sum after the second repair");
    }
    Expect(starling_context_destroy(ctx) == STARLING_SUCCESS, "destroy");
    std::printf("MEMBER rank=%d first_rank=%d joined=%d ok=1 grow_s=%.3f shrink_s=%.3f size=%d\n", rank, first_rank,
                joined, grow_s, g_shrink_s, size);
    std::fflush(stdout);
    return 0;
  } catch (const Failure& f) {
    std::printf("MEMBER rank=%d joined=%d ok=0 reason=%s\n", rank, joined, f.reason.c_str());
    std::fflush(stdout);
    starling_context_abort(ctx);
    starling_context_destroy(ctx);
    return 1;
  }
}
