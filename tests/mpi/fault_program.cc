// A job in which one rank fails mid-run; run by run_fault_test.py (under
// `mpirun --enable-recovery`, so that Open MPI does not kill the survivors itself) and
// by the launcher test (under starlingrun, which must then exit non-zero promptly).
//
//   fault_program <scenario> [victim]
//
// Every rank loops over the scenario's operations; after 0.3 s the victim (default:
// the last rank) fails:
//   collective  SIGKILL from a second thread while its main thread is in allreduce /
//               broadcast / allgather (small and large tensors)
//   neighbor    the same during neighbor_allreduce (blocking and nonblocking)
//   window      the same during window put / get / update
//   exit0       returns from its loop and calls exit(0) without destroying its context
//   exit3       the same with exit(3)
// Survivors keep looping until an operation fails, then check that it failed with
// STARLING_ERR_PEER_FAILED naming the victim, that later calls fail at once the same
// way, and that destroy returns quickly. Each rank prints one line for the driver:
//   VICTIM rank=R pid=P mono=T real=T          (just before it fails)
//   SURVIVOR rank=R ok=1 status=S mono=T ops=N destroy_s=D message=...
// CLOCK_MONOTONIC is system-wide, so the driver subtracts the victim's time from the
// survivors'. Exit status: 0 for a survivor whose checks passed, 1 otherwise.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <starling/starling.h>

namespace {

double Clock(clockid_t id) {
  timespec t{};
  clock_gettime(id, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
double Mono() { return Clock(CLOCK_MONOTONIC); }

struct Tensor {
  std::vector<float> data;
  int64_t shape[1];
  DLTensor t{};
  explicit Tensor(size_t n, float value = 1.0f) : data(n, value) {
    shape[0] = static_cast<int64_t>(n);
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
  }
};

int Fail(int rank, const std::string& why) {
  std::printf("SURVIVOR rank=%d ok=0 reason=%s last_error=%s\n", rank, why.c_str(), starling_last_error());
  std::fflush(stdout);
  return 1;
}

void AnnounceDeath(int rank) {
  std::printf("VICTIM rank=%d pid=%d mono=%.6f real=%.6f\n", rank, static_cast<int>(getpid()), Mono(),
              Clock(CLOCK_REALTIME));
  std::fflush(stdout);
}

}  // namespace

// Open MPI 5's launcher ends the whole job once a process exits without MPI_Finalize
// (a survivor's destroy after a failure does not finalize), which could kill a survivor
// still detecting the death (1 run in 4 of exit3.np3). So survivors leave together:
// each marks a file in the driver's directory and waits (at most 10 s) for the others.
static void WaitForOtherSurvivors(int rank, int survivors) {
  const char* dir = std::getenv("STARLING_FAULT_SYNC_DIR");
  if (dir == nullptr) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  std::FILE* mark = std::fopen((fs::path(dir) / ("survivor." + std::to_string(rank))).c_str(), "w");
  if (mark != nullptr) std::fclose(mark);
  const double until = Mono() + 10;
  while (Mono() < until) {
    int marked = 0;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().filename().string().rfind("survivor.", 0) == 0) ++marked;
    if (marked >= survivors) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "collective";
  starling_context_t ctx;
  if (starling_context_create(nullptr, &ctx) != STARLING_SUCCESS) {
    std::fprintf(stderr, "context_create: %s\n", starling_last_error());
    return 2;
  }
  int rank = 0, size = 1;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  const int victim = argc > 2 ? std::atoi(argv[2]) : size - 1;
  if (size < 2 || victim < 0 || victim >= size) {
    std::fprintf(stderr, "needs >= 2 ranks and a victim in range\n");
    return 2;
  }
  const bool by_signal = scenario == "collective" || scenario == "neighbor" || scenario == "window";
  if (!by_signal && scenario != "exit0" && scenario != "exit3") {
    std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
    return 2;
  }

  Tensor small(1024, 1.0f), large(256 * 1024, 1.0f);
  Tensor gathered_small(1024 * static_cast<size_t>(size)), gathered_large(256 * 1024 * static_cast<size_t>(size));
  Tensor win_tensor(4096, static_cast<float>(rank));
  starling_window_t win = nullptr;
  if (starling_window_create(ctx, &win_tensor.t, "faults.w", 0, &win) != STARLING_SUCCESS ||
      starling_barrier(ctx) != STARLING_SUCCESS) {
    std::fprintf(stderr, "setup: %s\n", starling_last_error());
    return 2;
  }

  // One round of the scenario's operations; returns the first failing status.
  auto round = [&](int i) -> starling_status_t {
    starling_status_t s = STARLING_SUCCESS;
    Tensor& x = i % 2 ? large : small;
    Tensor& all = i % 2 ? gathered_large : gathered_small;
    if (scenario == "neighbor") {
      if ((s = starling_neighbor_allreduce(ctx, &x.t, &x.t, nullptr))) return s;
      starling_request_t req;
      if ((s = starling_neighbor_allreduce_nonblocking(ctx, &small.t, &small.t, nullptr, &req))) return s;
      s = starling_request_wait(req);
      starling_request_free(req);
      return s;
    }
    if (scenario == "window") {
      if ((s = starling_window_put(win, &win_tensor.t, nullptr))) return s;
      if ((s = starling_window_get(win, nullptr))) return s;
      starling_window_update_args_t args = STARLING_WINDOW_UPDATE_ARGS_INIT;
      return starling_window_update(win, &args);
    }
    // collective (and the exit scenarios)
    if ((s = starling_allreduce(ctx, &x.t, &x.t, STARLING_AVERAGE, "faults.allreduce"))) return s;
    if ((s = starling_broadcast(ctx, &x.t, &x.t, i % size, "faults.broadcast"))) return s;
    return starling_allgather(ctx, &x.t, &all.t, nullptr, "faults.allgather");
  };

  const double start = Mono();
  if (rank == victim) {
    if (by_signal) {
      // Killed from another thread: the main thread is inside an operation.
      std::thread([rank] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        AnnounceDeath(rank);
        raise(SIGKILL);
      }).detach();
      for (int i = 0;; ++i) round(i);
    }
    for (int i = 0; Mono() - start < 0.3; ++i) round(i);
    AnnounceDeath(rank);
    std::exit(scenario == "exit0" ? 0 : 3);  // without destroying the context
  }

  // Survivors: loop until an operation fails (at most 30 s).
  starling_status_t status = STARLING_SUCCESS;
  int ops = 0;
  while (status == STARLING_SUCCESS && Mono() - start < 30) status = round(ops++);
  const double failed_at = Mono();
  const std::string message = starling_last_error();
  if (status == STARLING_SUCCESS) return Fail(rank, "no error within 30 s");
  if (status != STARLING_ERR_PEER_FAILED) return Fail(rank, "status " + std::to_string(status) + " is not PEER_FAILED");
  const std::string named = "rank " + std::to_string(victim) + " (pid ";
  if (message.find(named) == std::string::npos) return Fail(rank, "the message does not name '" + named + "'");
  // Later calls fail at once with the same status, naming the victim.
  const double later = Mono();
  status = starling_barrier(ctx);
  const std::string later_message = starling_last_error();
  if (status != STARLING_ERR_PEER_FAILED || later_message.find(named) == std::string::npos)
    return Fail(rank, "a later barrier returned " + std::to_string(status));
  starling_request_t req = nullptr;
  status = starling_allreduce_nonblocking(ctx, &small.t, &small.t, STARLING_SUM, "after", &req);
  if (status == STARLING_SUCCESS) {
    status = starling_request_wait(req);
    starling_request_free(req);
  }
  if (status != STARLING_ERR_PEER_FAILED) return Fail(rank, "a later nonblocking call gave " + std::to_string(status));
  if (Mono() - later > 0.5) return Fail(rank, "later calls took too long");
  // Local after a peer failure: the window handle goes, destroy does not wait for peers.
  if (starling_window_free(win) != STARLING_SUCCESS) return Fail(rank, "window_free after the failure");
  const double destroy_start = Mono();
  if (starling_context_destroy(ctx) != STARLING_SUCCESS) return Fail(rank, "destroy");
  const double destroy_s = Mono() - destroy_start;
  // Bound: the window service waits up to 2 s for replies still in flight to a dead rank.
  if (destroy_s > 3.0) return Fail(rank, "destroy took " + std::to_string(destroy_s) + " s");
  std::printf("SURVIVOR rank=%d ok=1 status=%d mono=%.6f ops=%d destroy_s=%.3f message=%s\n", rank, status, failed_at,
              ops, destroy_s, message.c_str());
  std::fflush(stdout);
  WaitForOtherSurvivors(rank, size - 1);
  return 0;
}
