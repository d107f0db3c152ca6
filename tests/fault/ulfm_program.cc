// A job on Open MPI 5 under `mpirun --with-ft ulfm` in which ranks die and the
// survivors repair the context and compute exact results; run by run_ulfm_test.py.
//
//   ulfm_program <scenario> [linger]   (linger: seconds the survivors wait before exiting)
//
// The victim (rank 1; rank 2 in neighbor_batch) dies by SIGKILL, sent by a thread of its own while its main
// thread is inside the scenario's operation (or at the scenario's chosen point):
//   allreduce         blocking allreduce in a loop
//   neighbor_static   neighbor_allreduce over the topology
//   neighbor_dynamic  neighbor_allreduce with explicit ring sources/destinations
//   pair_gossip       pair_gossip with rank ^ 1 (even sizes): the victim's partner finds
//                     the death, the other pair learns of it from the survivors
//   win_put / win_get / win_accumulate   one-sided window operations in a loop
//   mutex             after taking the mutex of rank 2's slot for it (the survivors'
//                     rank 2 then waits for that mutex, the others in a barrier)
//   pushsum           push-sum over a window with associated p; survivors go on after
//                     the repair and must agree on total x / total p
//   neighbor_batch    four nonblocking neighbor_allreduces, wait, allreduce, barrier per
//                     step; the victim dies at step 20 (issue 29's reproduction)
//   stopped           as neighbor_batch, but the victim stops (SIGSTOP) instead of dying:
//                     the launcher has nothing to report, as when a death goes
//                     unreported; survivors must get PEER_FAILED from a failure
//                     detector (Starling's heartbeat); rank 0 then SIGKILLs the victim
//                     so that MPI learns of it and the repair can shrink
//   neighbor_batch_anytime  the same, the victim killed by a thread of its own at a
//                     random time 0.2-0.8 s in (mid-send, mid-wait, ...)
//   fused             after submitting half of a batch of 64 small nonblocking
//                     allreduces (they fuse); survivors wait on every request
//   repair            as allreduce, then the last rank dies while the others are
//                     inside the repair (it never joins it)
//   finish            no failure: an allreduce checked exactly, a normal destroy, then
//                     rank 0 alone waits `linger` seconds before exiting ("FINISHED rank=R"
//                     lines; starlingrun --fault-tolerant must report no death)
// Survivors check that their failing call returned STARLING_ERR_PEER_FAILED naming
// the victim, repair (again if a rank died during the repair), check the renumbering,
// and assert exact results of allreduce, neighbor_allreduce and (window scenarios)
// window put + update on the repaired context. Lines for the driver:
//   VICTIM rank=R pid=P mono=T
//   SURVIVOR rank=R ok=1 detect_mono=T repaired_mono=T repair_s=D new_rank=N new_size=M message=...
//   SURVIVOR rank=R ok=0 reason=...
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

[[noreturn]] void Die(int rank) {
  std::printf("VICTIM rank=%d pid=%d mono=%.6f\n", rank, static_cast<int>(getpid()), Mono());
  std::fflush(stdout);
  raise(SIGKILL);
  for (;;) pause();
}

// Kills this process from another thread after `seconds` (the main thread is then
// inside an operation).
void DieLater(int rank, double seconds) {
  std::thread([rank, seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    Die(rank);
  }).detach();
}

void ExpectPeerFailed(int status, const std::string& what, int victim) {
  Expect(status == STARLING_ERR_PEER_FAILED, what + ": status " + std::to_string(status) + " is not PEER_FAILED");
  const std::string message = starling_last_error();
  Expect(message.find("rank " + std::to_string(victim)) != std::string::npos,
         what + ": the message does not name rank " + std::to_string(victim) + ": " + message);
}

// Exact results on the repaired context (x_r = r + 1 on every rank r).
void CheckResults(starling_context_t ctx, starling_window_t win, Tensor* window_tensor) {
  int rank = 0, size = 0;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  Tensor x(1000, rank + 1.0), sum(1000);
  Expect(starling_allreduce(ctx, &x.t, &sum.t, STARLING_SUM, "after repair") == STARLING_SUCCESS, "allreduce");
  const double expected_sum = size * (size + 1) / 2.0;
  for (double v : sum.data) Expect(v == expected_sum, "allreduce sum " + std::to_string(v) + " != " +
                                                          std::to_string(expected_sum));
  // Uniform average over self and in-neighbors (the default, unweighted topology).
  const std::vector<int> in = InNeighbors(ctx);
  double expected = rank + 1.0;
  for (int r : in) expected += r + 1.0;
  expected /= static_cast<double>(in.size() + 1);
  Tensor avg(1000);
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  Expect(starling_get_stats(ctx, &before) == STARLING_SUCCESS, "get_stats");
  Expect(starling_neighbor_allreduce(ctx, &x.t, &avg.t, nullptr) == STARLING_SUCCESS, "neighbor_allreduce");
  Expect(starling_get_stats(ctx, &after) == STARLING_SUCCESS, "get_stats");
  for (double v : avg.data)
    Expect(std::fabs(v - expected) <= 1e-12 * expected, "neighbor_allreduce " + std::to_string(v) + " != " +
                                                           std::to_string(expected));
  // The probe ran again over the survivors: their neighbor data goes through shared
  // memory (one host, STARLING_SHM not 0), by the new rank numbers.
  const char* shm = std::getenv("STARLING_SHM");
  int local = 0;
  starling_local_size(ctx, &local);
  if (!in.empty() && local == size && (shm == nullptr || std::string(shm) != "0"))
    Expect(after.shm_bytes_received > before.shm_bytes_received, "no neighbor data through shared memory after repair");
  if (win != nullptr) {
    window_tensor->Fill(rank + 1.0);
    Expect(starling_window_put(win, &window_tensor->t, nullptr) == STARLING_SUCCESS, "window_put after repair");
    Expect(starling_barrier(ctx) == STARLING_SUCCESS, "barrier");
    Expect(starling_window_update(win, nullptr) == STARLING_SUCCESS, "window_update after repair");
    for (double v : window_tensor->data)
      Expect(std::fabs(v - expected) <= 1e-12 * expected, "window_update " + std::to_string(v) + " != " +
                                                             std::to_string(expected));
  }
}

// One push-sum step: half of x and p to one out-neighbor (rotating), then collect.
int PushSumStep(starling_context_t ctx, starling_window_t win, Tensor* x) {
  static int step = 0;
  int out[64], count = 0;
  int s = starling_out_neighbors(ctx, out, 64, &count);
  if (s != STARLING_SUCCESS) return s;
  if (count > 0) {
    const int target = out[step++ % count];
    const double half = 0.5;
    starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
    args.num_ranks = 1;
    args.ranks = &target;
    args.weights = &half;
    args.self_weight = 0.5;
    s = starling_window_accumulate(win, &x->t, &args);
    if (s != STARLING_SUCCESS) return s;
  }
  return starling_window_update_then_collect(win, 0);
}

// After the repair: push-sum goes on over the survivors until it agrees. Every
// survivor's x/p must equal the survivors' total x / total p (push-sum conserves both
// from the repair on); returns what that value is next to the old world's average.
std::string PushSumAfterRepair(starling_context_t ctx, starling_window_t win, Tensor* x, int old_size) {
  for (int i = 0; i < 300; ++i) Expect(PushSumStep(ctx, win, x) == STARLING_SUCCESS, "push-sum step after repair");
  Expect(starling_barrier(ctx) == STARLING_SUCCESS, "barrier");
  Expect(starling_window_update_then_collect(win, 0) == STARLING_SUCCESS, "final collect");
  double p = 0;
  Expect(starling_window_associated_p(win, &p) == STARLING_SUCCESS, "associated p");
  Tensor mass(2), total(2), ratio(1), high(1), low(1);
  mass.data = {x->data[0], p};
  Expect(starling_allreduce(ctx, &mass.t, &total.t, STARLING_SUM, "mass") == STARLING_SUCCESS, "allreduce mass");
  ratio.data[0] = x->data[0] / p;
  Expect(starling_allreduce(ctx, &ratio.t, &high.t, STARLING_MAX, "max") == STARLING_SUCCESS, "allreduce max");
  Expect(starling_allreduce(ctx, &ratio.t, &low.t, STARLING_MIN, "min") == STARLING_SUCCESS, "allreduce min");
  const double value = total.data[0] / total.data[1];
  Expect(high.data[0] - low.data[0] <= 1e-9 * value, "push-sum did not reach consensus: x/p from " +
                                                         std::to_string(low.data[0]) + " to " +
                                                         std::to_string(high.data[0]));
  Expect(std::fabs(ratio.data[0] - value) <= 1e-9 * value,
         "x/p " + std::to_string(ratio.data[0]) + " != survivors' total x / total p " + std::to_string(value));
  char note[160];
  std::snprintf(note, sizeof note, "pushsum_value=%.6f pushsum_p_total=%.4f old_average=%.6f ", value, total.data[1],
                (old_size + 1) / 2.0);
  return note;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "allreduce";
  const double linger = argc > 2 ? std::atof(argv[2]) : 0.0;  // survivors' seconds before exiting
  starling_context_t ctx;
  if (starling_context_create(nullptr, &ctx) != STARLING_SUCCESS) {
    std::fprintf(stderr, "context_create: %s\n", starling_last_error());
    return 2;
  }
  int rank = 0, size = 1, ft = 0;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  starling_fault_tolerant(ctx, &ft);
  const int victim = (scenario.rfind("neighbor_batch", 0) == 0 || scenario == "stopped") && size > 3 ? 2 : 1;
  const int second_victim = size - 1;  // "repair": dies inside the repair
  pid_t victim_pid = 0;
  try {
    Expect(ft == 1, "starling_fault_tolerant is 0 (run under mpirun --with-ft ulfm)");
    Expect(size >= 3, "run with 3 or more ranks");
    Tensor x(4096, rank + 1.0), y(4096);
    Tensor wt(64, rank + 1.0);
    starling_window_t win = nullptr;
    const bool windowed = scenario.rfind("win_", 0) == 0 || scenario == "mutex";
    if (windowed) Expect(starling_window_create(ctx, &wt.t, "w", 0, &win) == STARLING_SUCCESS, "window_create");
    const bool pushsum = scenario == "pushsum";
    starling_window_t psw = nullptr;
    if (pushsum) {
      Expect(starling_set_window_associated_p_enabled(ctx, 1) == STARLING_SUCCESS, "associated p");
      Expect(starling_window_create(ctx, &wt.t, "ps", 1, &psw) == STARLING_SUCCESS, "window_create (push-sum)");
    }
    // "stopped": rank 0 ends the stopped victim once the survivors found it (its pid, from everyone's).
    Tensor pid(1, static_cast<double>(getpid())), pids(static_cast<size_t>(size));
    Expect(starling_allgather(ctx, &pid.t, &pids.t, nullptr, "pids") == STARLING_SUCCESS, "allgather pids");
    victim_pid = static_cast<pid_t>(pids.data[static_cast<size_t>(victim)]);
    Expect(starling_barrier(ctx) == STARLING_SUCCESS, "barrier before the failure");
    if (scenario == "finish") {
      Expect(starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "finish") == STARLING_SUCCESS, "allreduce");
      Expect(y.data[0] == size * (size + 1) / 2.0, "allreduce sum");
      Expect(starling_context_destroy(ctx) == STARLING_SUCCESS, "destroy");
      std::printf("FINISHED rank=%d\n", rank);
      std::fflush(stdout);
      if (rank == 0) std::this_thread::sleep_for(std::chrono::duration<double>(linger));
      return 0;
    }

    // --- the failure ---
    int status = STARLING_SUCCESS;
    const double loop_start = Mono();
    if (scenario == "mutex") {
      const int owner = victim + 1;
      if (rank == victim) {
        Expect(starling_window_mutex_acquire(win, &owner, 1, 0) == STARLING_SUCCESS, "mutex_acquire (victim)");
        starling_barrier(ctx);
        Die(rank);
      }
      // The victim may leave this barrier, and die, before a survivor has finished it (a
      // barrier only says everyone entered): then the failure shows here already.
      status = starling_barrier(ctx);
      if (status == STARLING_SUCCESS)
        status = rank == owner ? starling_window_mutex_acquire(win, &victim, 1, 1) : starling_barrier(ctx);
    } else if (scenario == "fused") {
      constexpr int kBatch = 64;
      std::vector<Tensor> in, out;
      in.reserve(kBatch);  // DLTensors point into their Tensor
      out.reserve(kBatch);
      for (int i = 0; i < kBatch; ++i) {
        in.emplace_back(16, rank + 1.0);
        out.emplace_back(16);
      }
      std::vector<starling_request_t> reqs(kBatch, nullptr);
      for (int i = 0; i < kBatch; ++i) {
        if (rank == victim && i == kBatch / 2) Die(rank);
        Expect(starling_allreduce_nonblocking(ctx, &in[i].t, &out[i].t, STARLING_SUM, nullptr, &reqs[i]) ==
                   STARLING_SUCCESS, "allreduce_nonblocking");
      }
      bool failed = false;
      for (int i = 0; i < kBatch; ++i) {
        const int s = starling_request_wait(reqs[i]);
        if (s != STARLING_SUCCESS) {
          ExpectPeerFailed(s, "fused request " + std::to_string(i), victim);
          if (!failed) status = s;
          failed = true;
        } else {
          Expect(!failed, "request " + std::to_string(i) + " succeeded after an earlier one failed");
        }
        starling_request_free(reqs[i]);
      }
      Expect(failed, "no request of the batch failed");
    } else if (scenario.rfind("neighbor_batch", 0) == 0 || scenario == "stopped") {
      // Issue 29's reproduction: per step four nonblocking neighbor_allreduces (fused),
      // wait for all, an allreduce and a barrier; the victim dies at the start of step
      // 20, so the survivors wait in the batch for its contribution. Each step's sum is
      // checked exactly.
      constexpr int kRequests = 4;
      std::vector<Tensor> in, out;
      in.reserve(kRequests);
      out.reserve(kRequests);
      for (int i = 0; i < kRequests; ++i) {
        in.emplace_back(256, rank + 1.0);
        out.emplace_back(256);
      }
      if (rank == victim && scenario == "neighbor_batch_anytime") {
        srand(static_cast<unsigned>(getpid()));
        DieLater(rank, 0.2 + 0.6 * (rand() / (RAND_MAX + 1.0)));  // at any point of a step
      }
      for (int step = 0; status == STARLING_SUCCESS; ++step) {
        Expect(Mono() - loop_start < 20, "no failure within 20 s");
        if (rank == victim && step == 20 && scenario == "neighbor_batch") Die(rank);
        if (rank == victim && step == 20 && scenario == "stopped") {
          // Not dead, so the launcher reports nothing: only a failure detector of
          // MPI's own can find it. Rank 0 SIGKILLs it once the survivors are done.
          std::printf("VICTIM rank=%d pid=%d mono=%.6f\n", rank, static_cast<int>(getpid()), Mono());
          std::fflush(stdout);
          raise(SIGSTOP);
        }
        starling_request_t reqs[kRequests] = {};
        for (int i = 0; i < kRequests; ++i)
          Expect(starling_neighbor_allreduce_nonblocking(ctx, &in[i].t, &out[i].t, nullptr, &reqs[i]) ==
                     STARLING_SUCCESS, "neighbor_allreduce_nonblocking");
        for (int i = 0; i < kRequests; ++i) {
          const int s = starling_request_wait(reqs[i]);
          if (s != STARLING_SUCCESS && status == STARLING_SUCCESS) status = s;
          starling_request_free(reqs[i]);
        }
        if (status != STARLING_SUCCESS) break;
        status = starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "step");
        if (status != STARLING_SUCCESS) break;
        Expect(y.data[0] == size * (size + 1) / 2.0, "allreduce sum at step " + std::to_string(step));
        status = starling_barrier(ctx);
      }
    } else {
      if (rank == victim) DieLater(rank, 0.2);
      const int right = (rank + 1) % size, left = (rank + size - 1) % size;
      const double half = 0.5;
      starling_neighbor_args_t dyn = STARLING_NEIGHBOR_ARGS_INIT;
      dyn.dynamic = 1;
      dyn.use_weights = 1;
      dyn.self_weight = 0.5;
      dyn.num_sources = 1;
      dyn.source_ranks = &left;
      dyn.source_weights = &half;
      dyn.num_destinations = 1;
      dyn.destination_ranks = &right;
      while (status == STARLING_SUCCESS) {
        Expect(Mono() - loop_start < 20, "no failure within 20 s");
        if (scenario == "allreduce" || scenario == "repair") {
          status = starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "loop");
        } else if (scenario == "neighbor_static") {
          status = starling_neighbor_allreduce(ctx, &x.t, &y.t, nullptr);
        } else if (scenario == "neighbor_dynamic") {
          status = starling_neighbor_allreduce(ctx, &x.t, &y.t, &dyn);
        } else if (scenario == "pair_gossip") {
          status = starling_pair_gossip(ctx, &x.t, &y.t, rank ^ 1, 0.5, 0.5, "gossip");
        } else if (scenario == "win_put") {
          status = starling_window_put(win, &wt.t, nullptr);
        } else if (scenario == "win_get") {
          status = starling_window_get(win, nullptr);
        } else if (scenario == "win_accumulate") {
          status = starling_window_accumulate(win, &wt.t, nullptr);
        } else if (pushsum) {
          // Paced like a training step: between ranks that share memory an accumulate
          // into a rank that is being killed succeeds until its process has exited (a
          // millisecond or more of teardown), and in a loop of 1 us steps the survivors'
          // mass would underflow to 0 in that time (x/p = NaN), though none is lost
          // from the repair on, which is what this scenario checks.
          std::this_thread::sleep_for(std::chrono::microseconds(20));
          status = PushSumStep(ctx, psw, &wt);
        } else {
          Expect(false, "unknown scenario " + scenario);
        }
      }
    }
    const double detect_mono = Mono();
    ExpectPeerFailed(status, scenario, victim);
    const std::string message = starling_last_error();
    // Later calls fail at once, the same way.
    Expect(starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "later") == STARLING_ERR_PEER_FAILED,
           "a later call did not fail with PEER_FAILED");

    // "stopped": the survivors found it (Starling's heartbeat); MPI learns of it only
    // once it is dead, and the repair's shrink waits until then.
    if (scenario == "stopped" && rank == 0) kill(victim_pid, SIGKILL);

    // --- repair (again while ranks die during it) ---
    std::vector<int> original(static_cast<size_t>(size));  // original rank -> current, -1 dropped
    for (int r = 0; r < size; ++r) original[static_cast<size_t>(r)] = r;
    std::vector<int> dropped;
    // "repair": the second victim never joins the repair; it dies while the others
    // are inside it (waiting for it in the shrink).
    if (scenario == "repair" && rank == second_victim) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Die(rank);
    }
    const double repair_start = Mono();
    double repaired_mono = 0;
    for (int attempt = 0; attempt < 4 && repaired_mono == 0; ++attempt) {
      int old_to_new[64], failed[64];
      starling_repair_result_t result = STARLING_REPAIR_RESULT_INIT;
      result.old_to_new = old_to_new;
      result.old_to_new_capacity = 64;
      result.failed = failed;
      result.failed_capacity = 64;
      const int s = starling_context_repair(ctx, nullptr, &result);
      if (s == STARLING_ERR_PEER_FAILED) continue;  // a rank died during the repair
      Expect(s == STARLING_SUCCESS, "repair returned " + std::to_string(s));
      for (int& r : original)
        if (r >= 0) r = old_to_new[r];
      for (int i = 0; i < result.num_failed; ++i) dropped.push_back(failed[i]);
      // A death right after the repair shows on the next call: repair again.
      Tensor probe(1, 1.0), total(1);
      const int p = starling_allreduce(ctx, &probe.t, &total.t, STARLING_SUM, "probe");
      if (p == STARLING_ERR_PEER_FAILED) continue;
      Expect(p == STARLING_SUCCESS, "allreduce after repair returned " + std::to_string(p));
      repaired_mono = Mono();
    }
    Expect(repaired_mono > 0, "the context was not repaired after 4 attempts");
    // The shared-memory probe ran again over the survivors.
    fault_support::ExpectShmProbedAgain(ctx, "the repair");
    int new_rank = -1, new_size = 0;
    starling_rank(ctx, &new_rank);
    starling_size(ctx, &new_size);
    // Survivors keep their order: the new rank counts the survivors below.
    std::vector<int> dead = {victim};
    if (scenario == "repair") dead.push_back(second_victim);
    int below = 0;
    for (int r = 0; r < rank; ++r) below += std::find(dead.begin(), dead.end(), r) == dead.end();
    Expect(new_size == size - static_cast<int>(dead.size()),
           "new size " + std::to_string(new_size) + ", expected " + std::to_string(size - dead.size()));
    Expect(new_rank == below && original[static_cast<size_t>(rank)] == below,
           "new rank " + std::to_string(new_rank) + ", expected " + std::to_string(below));
    for (int d : dead) Expect(original[static_cast<size_t>(d)] == -1, "a dead rank kept a number");
    CheckResults(ctx, win, &wt);
    std::string pushsum_note;
    if (pushsum) pushsum_note = PushSumAfterRepair(ctx, psw, &wt, size);
    if (win != nullptr) Expect(starling_window_free(win) == STARLING_SUCCESS, "window_free");
    if (psw != nullptr) Expect(starling_window_free(psw) == STARLING_SUCCESS, "window_free (push-sum)");
    std::this_thread::sleep_for(std::chrono::duration<double>(linger));
    Expect(starling_context_destroy(ctx) == STARLING_SUCCESS, "destroy");
    std::printf("SURVIVOR rank=%d ok=1 detect_mono=%.6f repaired_mono=%.6f repair_s=%.6f new_rank=%d new_size=%d "
                "%smessage=%s\n",
                rank, detect_mono, repaired_mono, repaired_mono - repair_start, new_rank, new_size,
                pushsum_note.c_str(), message.c_str());
    std::fflush(stdout);
    return 0;
  } catch (const Failure& f) {
    if (scenario == "stopped" && rank == 0 && victim_pid > 0) kill(victim_pid, SIGKILL);  // no job left hanging
    std::printf("SURVIVOR rank=%d ok=0 reason=%s\n", rank, f.reason.c_str());
    std::fflush(stdout);
    starling_context_abort(ctx);
    starling_context_destroy(ctx);
    return 1;
  }
}
