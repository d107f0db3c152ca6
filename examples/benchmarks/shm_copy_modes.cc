// Where the time of a same-host exchange goes, without MPI or Starling: two processes
// (fork) each hold a tensor x, and each exchange averages it with the peer's, in three
// ways, alternating blocks of one run:
//   push     x is copied (memcpy) into this process's half of a shared segment (two
//            buffers, alternating), the peer averages straight from there: Starling's
//            outbox path today
//   push_nt  the same copy with non-temporal stores
//   pull     the peer copies x out of this process's private memory itself
//            (process_vm_readv), then averages locally: every store stays on its own
//            core, as with Open MPI's single-copy path
// The two processes step in lockstep through counters in the segment. Prints, per way,
// the median microseconds of one exchange and of its parts (the copy, the wait for the
// peer, the average). A plain copy into a buffer the peer read two exchanges ago first
// takes each cache line back from the peer's core; what that costs depends on where
// the two cores are (docs/performance.md, "the slow mode").
//   build/examples/benchmarks/shm_copy_modes [--bytes 65536] [--iterations 4000] [--blocks 6]
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace {

enum Way { kPush, kPushNt, kPull, kWays };
const char* const kWayNames[kWays] = {"push", "push_nt", "pull"};

struct alignas(128) Counter {
  std::atomic<uint64_t> value{0};
};

// The segment's header: per process, the exchanges it published and those of the
// peer it finished reading; and each process's pid and x's address (for pull).
struct Header {
  Counter published[2];
  Counter consumed[2];
  Counter pid[2];
  Counter address[2];
};

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Spins, yielding the core now and then (the two processes may share one with others).
void WaitAtLeast(const Counter& c, uint64_t v) {
  for (int spins = 1; c.value.load(std::memory_order_acquire) < v; ++spins)
    if (spins % 1024 == 0) sched_yield();
}

void CopyNonTemporal(char* d, const char* s, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  size_t i = 0;
  for (; i + 16 <= bytes; i += 16)  // d is page-aligned here
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  std::memcpy(d + i, s + i, bytes - i);
  _mm_sfence();
#else
  std::memcpy(d, s, bytes);
#endif
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2] * 1e6;
}

struct Parts {
  std::vector<double> total, copy, wait, average;
};

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 65536;
  int iterations = 4000, blocks = 6;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--bytes") == 0) bytes = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--blocks") == 0) blocks = std::atoi(argv[i + 1]);
  }
  if (bytes < 4 || bytes % 4 != 0 || iterations < 1 || blocks < 1) {
    std::fprintf(stderr, "--bytes must be a positive multiple of 4, --iterations and --blocks positive\n");
    return 2;
  }
  const size_t n = bytes / sizeof(float);
  const size_t stride = (bytes + 4095) / 4096 * 4096;
  const size_t total = 4096 + 4 * stride;  // header page, then 2 buffers per process
  void* map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  char* base = static_cast<char*>(map);
  auto* header = new (base) Header{};
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  const int me = child == 0 ? 1 : 0, peer = 1 - me;
  std::vector<float> x(n, 1.0f + static_cast<float>(me)), pulled(n), out(n);
  header->pid[me].value.store(static_cast<uint64_t>(getpid()));
  header->address[me].value.store(reinterpret_cast<uintptr_t>(x.data()), std::memory_order_release);
  WaitAtLeast(header->address[peer], 1);
  const auto peer_pid = static_cast<pid_t>(header->pid[peer].value.load());
  void* const peer_x = reinterpret_cast<void*>(header->address[peer].value.load());
  auto pull = [&](void* dst, size_t count) {
    iovec local{dst, count};
    iovec remote{peer_x, count};
    return process_vm_readv(peer_pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(count);
  };
  // Where the kernel refuses (ptrace rules, seccomp), pull is left out.
  const bool can_pull = pull(pulled.data(), sizeof(float));
  const int ways = can_pull ? kWays : kPull;
  auto buffer = [&](int process, uint64_t exchange) {
    return base + 4096 + (static_cast<size_t>(process) * 2 + exchange % 2) * stride;
  };
  std::vector<Parts> parts(kWays);
  uint64_t exchange = 0;
  for (int block = 0; block < blocks; ++block) {
    for (int way = 0; way < ways; ++way) {
      for (int it = 0; it < iterations; ++it) {
        ++exchange;
        const double t0 = Now();
        // The buffer written now was read by the peer two exchanges ago.
        if (exchange > 2) WaitAtLeast(header->consumed[peer], exchange - 2);
        const double t1 = Now();
        if (way == kPush) std::memcpy(buffer(me, exchange), x.data(), bytes);
        if (way == kPushNt) CopyNonTemporal(buffer(me, exchange), reinterpret_cast<const char*>(x.data()), bytes);
        const double t2 = Now();
        header->published[me].value.store(exchange, std::memory_order_release);
        WaitAtLeast(header->published[peer], exchange);
        const double t3 = Now();
        const float* theirs = reinterpret_cast<const float*>(buffer(peer, exchange));
        if (way == kPull) {
          if (!pull(pulled.data(), bytes)) pulled.assign(n, 0.0f);  // the check below fails
          theirs = pulled.data();
        }
        const double t4 = Now();
        const float* __restrict a = x.data();
        float* __restrict o = out.data();
        for (size_t i = 0; i < n; ++i) o[i] = (a[i] + theirs[i]) * 0.5f;
        const double t5 = Now();
        // pull: x is never written in this program, so the peer may read it any time.
        header->consumed[me].value.store(exchange, std::memory_order_release);
        Parts& p = parts[static_cast<size_t>(way)];
        p.total.push_back(t5 - t0);
        p.copy.push_back((t2 - t1) + (t4 - t3));
        p.wait.push_back((t1 - t0) + (t3 - t2));
        p.average.push_back(t5 - t4);
      }
    }
  }
  // The peer may still pull this process's x: it stays until the peer's last average.
  WaitAtLeast(header->consumed[peer], exchange);
  const bool right = std::all_of(out.begin(), out.end(), [](float v) { return v == 1.5f; });
  if (me == 1) {
    for (int way = 0; way < ways; ++way) {
      const Parts& p = parts[static_cast<size_t>(way)];
      std::printf("%zu %s total_us %.1f copy_us %.1f wait_us %.1f average_us %.1f\n", bytes, kWayNames[way],
                  Median(p.total), Median(p.copy), Median(p.wait), Median(p.average));
    }
    if (!can_pull) std::printf("%zu pull not measured: the kernel refused process_vm_readv\n", bytes);
    std::fflush(stdout);
    return right ? 0 : 1;
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!right) std::fprintf(stderr, "shm_copy_modes: wrong average\n");
  return right && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
