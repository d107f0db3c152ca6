// The failure marathon's job (run_marathon.py drives it; examples/benchmarks/
// failure_marathon.sh runs the long version): ranks compute in a loop with exact integer
// checks while the driver SIGKILLs a random rank every few seconds; the survivors repair
// the context and grow a replacement back at the dead rank's place, which pulls the
// state from rank 0 and joins the loop. The same program is the replacement (the grow
// starts this executable with these arguments again).
//
//   marathon_program DIR
//
// Per step, on every rank r of the N-rank context: an int64 allreduce of
// H(step, r, k) for k < K, checked exactly against the sum computed locally and added
// to the accumulator `acc` (every rank holds the same acc); a neighbor_allreduce of
// step + r + 1 checked against the average over self and in-neighbors; rank 0 adds
// whether DIR/stop exists to the allreduce, and the job stops when it does. At the end
// every rank checks that all ranks hold the same acc and that it equals the sum over
// the steps done, computed independently here.
// Files in DIR (the driver reads them): `members` (rank pid lines, rewritten by rank
// 0 after every completed recovery, first line "cycle C"), `log` (lines appended by
// every process: DETECT/REPAIRED/GROWN/RSS/DONE/FAIL with CLOCK_MONOTONIC times).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <starling/starling.h>

#include "fault_support.h"

namespace {

using fault_support::Mono;

constexpr int K = 64;  // accumulator length

using Int64Tensor = fault_support::VectorTensor<int64_t>;

// A value every rank can compute for any (step, rank, k): below 2^20, so sums of a
// few thousand steps stay exact in int64.
int64_t H(int64_t step, int64_t rank, int64_t k) {
  uint64_t x = static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(rank) * 0xC2B2AE3D27D4EB4Full ^
               static_cast<uint64_t>(k) * 0x165667B19E3779F9ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<int64_t>(x & 0xFFFFF);
}

std::string g_dir;

// One line appended to DIR/log with a single write (O_APPEND: lines never interleave).
void Log(const char* format, ...) {
  char line[4096];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(line, sizeof line - 1, format, args);
  va_end(args);
  n = std::min(n, static_cast<int>(sizeof line) - 2);
  line[n++] = '\n';
  const int fd = open((g_dir + "/log").c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  ssize_t written = write(fd, line, static_cast<size_t>(n));
  (void)written;
  close(fd);
}

double RssMiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      return kib / 1024.0;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

// The shared-memory files this process maps (Open MPI's segments): the driver checks
// that none is left once the job is over.
std::string MappedShm() {
  std::ifstream maps("/proc/self/maps");
  std::string line, paths;
  while (std::getline(maps, line)) {
    const size_t at = line.find("/dev/shm/");
    if (at == std::string::npos) continue;
    std::string path = line.substr(at);
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) continue;
    if (paths.find(path) == std::string::npos) paths += (paths.empty() ? "" : ",") + path;
  }
  return paths;
}

// Shared-memory mappings whose file is gone (a dead peer's segment still mapped):
// how many and their resident KiB, from /proc/self/smaps.
std::string DeletedShm() {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  int count = 0;
  long rss_kib = 0;
  bool in_deleted = false;
  while (std::getline(smaps, line)) {
    if (line.find("/dev/shm/") != std::string::npos || (!line.empty() && std::isxdigit(line[0]) && line.find('-') < 16)) {
      in_deleted = line.find("/dev/shm/") != std::string::npos && line.find("(deleted)") != std::string::npos;
      count += in_deleted;
    } else if (in_deleted && line.rfind("Rss:", 0) == 0) {
      rss_kib += std::atol(line.c_str() + 4);
    }
  }
  return "shm_deleted_maps=" + std::to_string(count) + " shm_deleted_rss_kib=" + std::to_string(rss_kib);
}

struct Failed {  // a call failed with PEER_FAILED: recover
};
struct Fatal {
  std::string what;
};

void Call(int status, const char* what) {
  if (status == STARLING_SUCCESS) return;
  if (status == STARLING_ERR_PEER_FAILED) throw Failed{};
  throw Fatal{std::string(what) + " returned " + std::to_string(status) + ": " + starling_last_error()};
}

struct Job {
  starling_context_t ctx = nullptr;
  int rank = 0, size = 0, target = 0;  // target: the size the job keeps
  int64_t step = 0, cycle = 0;
  std::vector<int64_t> acc = std::vector<int64_t>(K, 0);
  std::vector<int> position;  // current rank -> rank in the full job (its place)
  bool stop = false;

  void Refresh() {
    starling_rank(ctx, &rank);
    starling_size(ctx, &size);
  }

  // One step; returns normally or throws Failed/Fatal.
  void Step() {
    Int64Tensor mine(K + 1), sum(K + 1);
    for (int k = 0; k < K; ++k) mine.data[k] = H(step, rank, k);
    mine.data[K] = rank == 0 && access((g_dir + "/stop").c_str(), F_OK) == 0;
    Call(starling_allreduce(ctx, &mine.t, &sum.t, STARLING_SUM, "marathon"), "allreduce");
    for (int k = 0; k < K; ++k) {
      int64_t expected = 0;
      for (int r = 0; r < size; ++r) expected += H(step, r, k);
      if (sum.data[k] != expected)
        throw Fatal{"step " + std::to_string(step) + ": allreduce element " + std::to_string(k) + " is " +
                    std::to_string(sum.data[k]) + ", expected " + std::to_string(expected)};
    }
    fault_support::Tensor x(256, static_cast<double>(step + rank + 1)), avg(256);
    Call(starling_neighbor_allreduce(ctx, &x.t, &avg.t, nullptr), "neighbor_allreduce");
    int in[64], count = 0;
    Call(starling_in_neighbors(ctx, in, 64, &count), "in_neighbors");
    double expected = static_cast<double>(step + rank + 1);
    for (int i = 0; i < count; ++i) expected += static_cast<double>(step + in[i] + 1);
    expected /= count + 1;
    for (double v : avg.data)
      if (std::fabs(v - expected) > 1e-12 * expected)
        throw Fatal{"step " + std::to_string(step) + ": neighbor_allreduce " + std::to_string(v) + ", expected " +
                    std::to_string(expected)};
    for (int k = 0; k < K; ++k) acc[k] += sum.data[k];
    ++step;
    stop = sum.data[K] > 0;
  }

  // Every member takes rank 0's step, cycle and accumulator (a step can complete on
  // some ranks and fail on others; a newcomer has nothing yet).
  void Sync() {
    Int64Tensor state(K + 4);
    state.data[0] = step;
    state.data[1] = cycle;
    state.data[2] = target;
    state.data[3] = stop;
    std::copy(acc.begin(), acc.end(), state.data.begin() + 4);
    Call(starling_broadcast(ctx, &state.t, &state.t, 0, "marathon state"), "broadcast");
    step = state.data[0];
    cycle = state.data[1];
    target = static_cast<int>(state.data[2]);
    stop = state.data[3] != 0;
    std::copy(state.data.begin() + 4, state.data.end(), acc.begin());
    Int64Tensor pid(1), pids(static_cast<size_t>(size));
    pid.data[0] = getpid();
    Call(starling_allgather(ctx, &pid.t, &pids.t, nullptr, "marathon pids"), "allgather pids");
    if (rank == 0) {
      const std::string tmp = g_dir + "/members.tmp";
      FILE* f = std::fopen(tmp.c_str(), "w");
      if (f == nullptr) throw Fatal{"cannot write " + tmp};
      std::fprintf(f, "cycle %lld\n", static_cast<long long>(cycle));
      for (int r = 0; r < size; ++r) std::fprintf(f, "%d %lld\n", r, static_cast<long long>(pids.data[r]));
      std::fclose(f);
      std::rename(tmp.c_str(), (g_dir + "/members").c_str());
    }
  }

  // After PEER_FAILED: repair until the context is usable, grow replacements at the
  // dead ranks' places, sync. Any failure meanwhile starts over.
  void Recover() {
    Log("DETECT pid=%d rank=%d cycle=%lld mono=%.6f", getpid(), rank, static_cast<long long>(cycle), Mono());
    for (int attempt = 0;; ++attempt) {
      if (attempt == 50) throw Fatal{"no recovery after 50 attempts"};
      try {
        int old_to_new[256], failed[256];
        starling_repair_result_t result = STARLING_REPAIR_RESULT_INIT;
        result.old_to_new = old_to_new;
        result.old_to_new_capacity = 256;
        result.failed = failed;
        result.failed_capacity = 256;
        const int old_size = size;
        Call(starling_context_repair(ctx, nullptr, &result), "repair");
        std::vector<int> kept(static_cast<size_t>(result.new_size));
        for (int r = 0; r < old_size; ++r)
          if (old_to_new[r] >= 0) kept[static_cast<size_t>(old_to_new[r])] = position[static_cast<size_t>(r)];
        position = kept;
        Refresh();
        Log("REPAIRED pid=%d rank=%d size=%d mono=%.6f", getpid(), rank, size, Mono());
        if (size < target) {
          std::vector<int> places;  // the full job's ranks nobody holds, ascending
          for (int p = 0; p < target; ++p)
            if (std::find(position.begin(), position.end(), p) == position.end()) places.push_back(p);
          starling_grow_options_t options = STARLING_GROW_OPTIONS_INIT;
          options.count = static_cast<int>(places.size());
          options.ranks = places.data();
          const double start = Mono();
          Call(starling_context_grow(ctx, &options, nullptr), "grow");
          Refresh();
          position.resize(static_cast<size_t>(size));
          for (int r = 0; r < size; ++r) position[static_cast<size_t>(r)] = r;
          Log("GROWN pid=%d rank=%d size=%d grow_s=%.6f mono=%.6f", getpid(), rank, size, Mono() - start, Mono());
        }
        if (rank == 0) ++cycle;
        Sync();
        return;
      } catch (const Failed&) {
        Refresh();
        // The grow can also fail with TRANSPORT or TIMEOUT (a newcomer died before
        // joining): Call() turns those into Fatal; they are not expected here.
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: marathon_program DIR\n");
    return 2;
  }
  g_dir = argv[1];
  Job job;
  if (starling_context_create(nullptr, &job.ctx) != STARLING_SUCCESS) {
    Log("FAIL pid=%d context_create: %s", getpid(), starling_last_error());
    return 1;
  }
  int joined = 0;
  starling_joined(job.ctx, &joined);
  job.Refresh();
  job.target = job.size;
  job.position.resize(static_cast<size_t>(job.size));
  for (int r = 0; r < job.size; ++r) job.position[static_cast<size_t>(r)] = r;
  double rss_start = 0;
  int64_t rss_cycle = -1;
  try {
    bool synced = false;
    while (!synced) {  // a newcomer, or the first members file
      try {
        job.Sync();
        synced = true;
      } catch (const Failed&) {
        job.Recover();
        synced = true;
      }
    }
    Log("SHM pid=%d paths=%s", getpid(), MappedShm().c_str());
    if (joined) Log("JOINED pid=%d rank=%d cycle=%lld mono=%.6f", getpid(), job.rank,
                    static_cast<long long>(job.cycle), Mono());
    // Steps until rank 0 sees DIR/stop, then the final exchange; a failure anywhere
    // is recovered from (after it every rank follows rank 0's state, stop included).
    Int64Tensor lo(K), hi(K);
    for (bool done = false; !done;) {
      try {
        if (!job.stop) {
          job.Step();
        } else {
          Int64Tensor a(K);
          std::copy(job.acc.begin(), job.acc.end(), a.data.begin());
          Call(starling_allreduce(job.ctx, &a.t, &lo.t, STARLING_MIN, "final min"), "allreduce");
          Call(starling_allreduce(job.ctx, &a.t, &hi.t, STARLING_MAX, "final max"), "allreduce");
          done = true;
        }
      } catch (const Failed&) {
        job.Recover();
      }
      // RSS after warm-up (cycle 2) and at the end, for the long-lived ranks.
      if (rss_cycle < 0 && job.cycle >= 2) {
        rss_cycle = job.cycle;
        rss_start = RssMiB();
      }
    }
    for (int k = 0; k < K; ++k) {
      int64_t expected = 0;
      for (int64_t s = 0; s < job.step; ++s)
        for (int r = 0; r < job.target; ++r) expected += H(s, r, k);
      if (lo.data[k] != hi.data[k] || job.acc[k] != expected)
        throw Fatal{"final accumulator element " + std::to_string(k) + ": " + std::to_string(job.acc[k]) +
                    " (min " + std::to_string(lo.data[k]) + ", max " + std::to_string(hi.data[k]) + "), expected " +
                    std::to_string(expected)};
    }
    const double rss_end = RssMiB();
    const int destroyed = starling_context_destroy(job.ctx);
    Log("DONE pid=%d rank=%d joined=%d steps=%lld cycles=%lld rss_cycle=%lld rss_start_mib=%.1f rss_end_mib=%.1f "
        "destroy=%d exact=1 %s",
        getpid(), job.rank, joined, static_cast<long long>(job.step), static_cast<long long>(job.cycle),
        static_cast<long long>(rss_cycle), rss_start, rss_end, destroyed, DeletedShm().c_str());
    return destroyed == STARLING_SUCCESS ? 0 : 1;
  } catch (const Fatal& f) {
    Log("FAIL pid=%d rank=%d %s", getpid(), job.rank, f.what.c_str());
    starling_context_abort(job.ctx);
    starling_context_destroy(job.ctx);
    return 1;
  }
}
