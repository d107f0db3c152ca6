// One-sided windows: every operation against independent references, asynchrony
// (the target computes while puts land), consistency under races, and bad input.
#include <mpi.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <functional>
#include <thread>

#include "test_util.h"

namespace starling_test {
namespace {

class Windows : public ContextTest {
 protected:
  void Use(std::function<starling_status_t(starling_topology_t*)> make, int weighted = 0) {
    starling_topology_t t = nullptr;
    ASSERT_OK(make(&t));
    ASSERT_OK(starling_set_topology(ctx, t, weighted));
    starling_topology_free(t);
  }
  std::vector<int> Neighbors(bool in) {
    int count = 0;
    (in ? starling_in_neighbors : starling_out_neighbors)(ctx, nullptr, 0, &count);
    std::vector<int> v(count);
    if (count > 0) EXPECT_OK((in ? starling_in_neighbors : starling_out_neighbors)(ctx, v.data(), count, &count));
    return v;
  }
};

TEST_F(Windows, CreateLookupNamesFree) {
  Buffer a(Kind::kF32, {3}), b(Kind::kF64, {2, 2});
  starling_window_t wa, wb, found;
  ASSERT_OK(starling_window_create(ctx, &a.t, "a", 0, &wa));
  ASSERT_OK(starling_window_create(ctx, &b.t, "b", 1, &wb));
  ASSERT_OK(starling_window_lookup(ctx, "b", &found));
  EXPECT_EQ(found, wb);
  char names[16];
  size_t length = 0;
  ASSERT_OK(starling_window_names(ctx, names, sizeof names, &length));
  EXPECT_STREQ(names, "a\nb");
  EXPECT_EQ(length, 3u);
  EXPECT_ERROR(starling_window_names(ctx, names, 2, &length), STARLING_ERR_INVALID_ARGUMENT, "too small");
  EXPECT_ERROR(starling_window_create(ctx, &a.t, "a", 0, &found), STARLING_ERR_ALREADY_EXISTS, "'a' already exists");
  ASSERT_OK(starling_window_free(wa));
  EXPECT_ERROR(starling_window_lookup(ctx, "a", &found), STARLING_ERR_NOT_FOUND, "no window named 'a'");
  EXPECT_ERROR(starling_window_put(wa, &a.t, nullptr), STARLING_ERR_INVALID_HANDLE, "already freed");
  EXPECT_ERROR(starling_window_free(wa), STARLING_ERR_INVALID_HANDLE, "already freed");
  ASSERT_OK(starling_window_free(wb));
  ASSERT_OK(starling_window_names(ctx, names, sizeof names, &length));
  EXPECT_EQ(length, 0u);
}

TEST_F(Windows, PutLandsInOutNeighborsBuffersWithVersions) {
  const std::vector<std::function<starling_status_t(starling_topology_t*)>> topologies = {
      [&](starling_topology_t* t) { return starling_topology_exponential_two(size, t); },
      [&](starling_topology_t* t) { return starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, t); },
      [&](starling_topology_t* t) { return starling_topology_star(size, 0, t); }};
  int salt = 0;
  for (const auto& make : topologies) {
    Use(make);
    for (Kind k : {Kind::kF32, Kind::kF64, Kind::kF16, Kind::kI32, Kind::kI64, Kind::kU8}) {
      for (int64_t n : {int64_t{5}, int64_t{100000}}) {
        if (n > 5 && k != Kind::kF32) continue;
        ++salt;
        Buffer x(k, {n});
        for (int64_t i = 0; i < n; ++i) x.set(i, Value(k, rank, i, salt));
        starling_window_t win;
        ASSERT_OK(starling_window_create(ctx, &x.t, "w", 1, &win));
        ASSERT_OK(starling_window_put(win, &x.t, nullptr));
        ASSERT_OK(starling_barrier(ctx));  // every put was acknowledged before its sender got here
        const std::vector<int> in = Neighbors(true);
        std::vector<int> ranks(in.size());
        std::vector<int64_t> versions(in.size());
        int count = 0;
        ASSERT_OK(starling_window_versions(win, ranks.data(), versions.data(), static_cast<int>(in.size()), &count));
        EXPECT_EQ(ranks, in);
        for (int64_t v : versions) EXPECT_EQ(v, 1);
        for (int src : in) {
          ReadBuffer(win, src);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(x.get(i), Value(k, src, i, salt)) << KindName(k) << " buffer of rank " << src;
        }
        ASSERT_OK(starling_window_versions(win, ranks.data(), versions.data(), static_cast<int>(in.size()), &count));
        for (int64_t v : versions) EXPECT_EQ(v, 0) << "update resets versions";
        ASSERT_OK(starling_window_free(win));
      }
    }
  }
}

TEST_F(Windows, WeightsSelfWeightGetAndDefaultUpdates) {
  Use([&](starling_topology_t* t) { return starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, t); });
  const std::vector<int> in = Neighbors(true), out = Neighbors(false);
  Buffer x(Kind::kF64, {8});
  auto value = [](int r, int i) { return 1.0 + r + 0.125 * i; };
  for (int i = 0; i < 8; ++i) x.set(i, value(rank, i));
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "w", 0, &win));
  // Put with per-destination weights 0.5 + 0.25 * dst, then the tensor is scaled by 0.5.
  std::vector<double> w;
  for (int d : out) w.push_back(0.5 + 0.25 * d);
  starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
  args.num_ranks = static_cast<int>(out.size());
  args.ranks = out.data();
  args.weights = w.data();
  args.self_weight = 0.5;
  starling_request_t req;
  ASSERT_OK(starling_window_put_nonblocking(win, &x.t, &args, &req));
  ASSERT_OK(starling_request_wait(req));
  ASSERT_OK(starling_request_free(req));
  for (int i = 0; i < 8; ++i) ASSERT_EQ(x.get(i), 0.5 * value(rank, i));
  ASSERT_OK(starling_barrier(ctx));
  // Default update over a uniform topology: (x + sum of buffers) / (k + 1).
  ASSERT_OK(starling_window_update(win, nullptr));
  for (int i = 0; i < 8; ++i) {
    double expected = 0.5 * value(rank, i);
    for (int s : in) expected += (0.5 + 0.25 * rank) * value(s, i);
    ASSERT_NEAR(x.get(i), expected / (in.size() + 1), 1e-12);
  }
  ASSERT_OK(starling_barrier(ctx));  // everyone has read before anyone gets again
  // Get from every in-neighbor with weight 2: buffers = 2 * their tensors.
  std::vector<double> two(in.size(), 2.0);
  starling_window_args_t get = STARLING_WINDOW_ARGS_INIT;
  get.num_ranks = static_cast<int>(in.size());
  get.ranks = in.data();
  get.weights = two.data();
  for (int i = 0; i < 8; ++i) x.set(i, value(rank, i));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_get(win, &get));
  std::vector<int> ranks(in.size());
  std::vector<int64_t> versions(in.size());
  int count;
  ASSERT_OK(starling_window_versions(win, ranks.data(), versions.data(), static_cast<int>(in.size()), &count));
  for (int64_t v : versions) EXPECT_EQ(v, 1) << "a get counts a version";
  ASSERT_OK(starling_barrier(ctx));
  for (int s : in) {
    ReadBuffer(win, s);
    for (int i = 0; i < 8; ++i) ASSERT_EQ(x.get(i), 2.0 * value(s, i));
  }
  ASSERT_OK(starling_window_free(win));
}

TEST_F(Windows, WeightedTopologyUpdateAndCollect) {
  Use([&](starling_topology_t* t) { return starling_topology_star(size, 0, t); }, 1);
  const std::vector<int> in = Neighbors(true);
  Buffer x(Kind::kF32, {4});
  for (int i = 0; i < 4; ++i) x.set(i, rank + 1.0);
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "star", 1, &win));
  ASSERT_OK(starling_window_put(win, &x.t, nullptr));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_update(win, nullptr));
  // Star weights: the center averages everyone, a leaf keeps (1 - 1/p) and takes 1/p of the center.
  double expected = 0;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) expected += (r + 1.0) / size;
  } else {
    expected = (1.0 - 1.0 / size) * (rank + 1.0) + 1.0 / size * 1.0;
  }
  for (int i = 0; i < 4; ++i) ASSERT_NEAR(x.get(i), expected, 1e-5);
  // update_then_collect: tensor += sum of buffers, buffers zeroed.
  ASSERT_OK(starling_barrier(ctx));
  for (int i = 0; i < 4; ++i) x.set(i, 1.0);
  ASSERT_OK(starling_window_put(win, &x.t, nullptr));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_update_then_collect(win, 1));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(x.get(i), 1.0 + in.size());
  ASSERT_OK(starling_window_update_then_collect(win, 0));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(x.get(i), 1.0 + in.size()) << "collect zeroes the buffers";
  ASSERT_OK(starling_window_free(win));
}

TEST_F(Windows, ConcurrentAccumulatesLoseNothing) {
  if (size < 2) GTEST_SKIP();
  // Everyone accumulates into rank 0 (star: leaves are rank 0's in-neighbors) many
  // times; integer-valued floats make the expected sums exact.
  Use([&](starling_topology_t* t) { return starling_topology_star(size, 0, t); });
  for (Kind k : {Kind::kF32, Kind::kI64}) {
    Buffer x(k, {1000});
    starling_window_t win;
    ASSERT_OK(starling_window_create(ctx, &x.t, "acc", 1, &win));
    const int kRounds = 25;
    if (rank != 0) {
      const int zero = 0;
      starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
      args.num_ranks = 1;
      args.ranks = &zero;
      std::vector<starling_request_t> reqs(kRounds);
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < 1000; ++i) x.set(i, rank * 3 + round + i % 7);
        ASSERT_OK(starling_window_accumulate(win, &x.t, &args));
      }
    }
    ASSERT_OK(starling_barrier(ctx));
    if (rank == 0) {
      for (int i = 0; i < 1000; ++i) x.set(i, 0);
      ASSERT_OK(starling_window_update_then_collect(win, 0));
      for (int i = 0; i < 1000; ++i) {
        double expected = 0;
        for (int r = 1; r < size; ++r)
          for (int round = 0; round < kRounds; ++round) expected += r * 3 + round + i % 7;
        ASSERT_EQ(x.get(i), expected) << KindName(k) << " element " << i;
      }
    }
    ASSERT_OK(starling_window_free(win));
  }
}

TEST_F(Windows, PutCompletesWhileTheTargetComputes) {
  if (size < 2) GTEST_SKIP();
  Use([&](starling_topology_t* t) { return starling_topology_fully_connected(size, t); });
  Buffer x(Kind::kF32, {1 << 16});
  for (int i = 0; i < (1 << 16); ++i) x.set(i, rank + 0.5);
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "async", 1, &win));
  ASSERT_OK(starling_barrier(ctx));
  if (rank == 0) {
    // Busy for 2 s without calling Starling.
    const auto start = std::chrono::steady_clock::now();
    volatile double sink = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) sink = sink + 1.0;
    std::vector<int> ranks(size - 1);
    std::vector<int64_t> versions(size - 1);
    int count;
    ASSERT_OK(starling_window_versions(win, ranks.data(), versions.data(), size - 1, &count));
    for (int i = 0; i < count; ++i) EXPECT_EQ(versions[i], 1) << "the put of rank " << ranks[i] << " is missing";
    ReadBuffer(win, 1);
    EXPECT_EQ(x.get(12345), 1.5);
  } else {
    const int zero = 0;
    starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
    args.num_ranks = 1;
    args.ranks = &zero;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 is computing by now
    const auto start = std::chrono::steady_clock::now();
    ASSERT_OK(starling_window_put(win, &x.t, &args));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(took, 0.1) << "the put waited for the target's thread";
    std::printf("[rank %d] put to a busy target took %.2f ms\n", rank, took * 1e3);
  }
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_free(win));
}

TEST_F(Windows, PutsRacingUpdatesNeverTearBuffers) {
  if (size < 2) GTEST_SKIP();
  Use([&](starling_topology_t* t) { return starling_topology_ring(size, STARLING_RING_RIGHT, t); });
  const int source = (rank - 1 + size) % size;  // right ring: the one in-neighbor
  Buffer x(Kind::kF64, {50000});
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "race", 1, &win));
  for (int require_mutex = 0; require_mutex < 2; ++require_mutex) {
    // A thread puts constant tensors (all elements = round) while this thread reads
    // its buffer with update: every read must be uniform.
    Buffer send(Kind::kF64, {50000});
    std::atomic<bool> failed{false};
    std::thread putter([&] {
      starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
      args.require_mutex = require_mutex;
      for (int round = 1; round <= 40; ++round) {
        for (int i = 0; i < 50000; ++i) send.set(i, round);
        if (starling_window_put(win, &send.t, &args) != STARLING_SUCCESS) failed = true;
      }
    });
    const double one = 1.0;
    starling_window_update_args_t u = OneSourceUpdate(&source, &one, 0.0);
    u.require_mutex = require_mutex;
    for (int read = 0; read < 200; ++read) {
      ASSERT_OK(starling_window_update(win, &u));
      const double first = x.get(0);
      for (int i = 1; i < 50000; i += 997) ASSERT_EQ(x.get(i), first) << "torn buffer at read " << read;
    }
    putter.join();
    EXPECT_FALSE(failed);
    ASSERT_OK(starling_barrier(ctx));
  }
  // Explicit mutexes: hold ours, a remote acquire waits until we release.
  ASSERT_OK(starling_window_mutex_acquire(win, nullptr, 0, 1));
  ASSERT_OK(starling_window_mutex_release(win, nullptr, 0, 1));
  ASSERT_OK(starling_window_mutex_acquire(win, nullptr, 0, 0));
  ASSERT_OK(starling_window_mutex_release(win, nullptr, 0, 0));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_free(win));
}

// Gets racing the source's updates: on one host a get reads the source's tensor from
// its memory while the source may be rewriting it (window_update). Every get must see
// the tensor before or after an update, never half of each. Odd ranks update in a loop,
// switching their tensor between v and 2v (self weights 2 and 0.5, exact in binary);
// even ranks get from their in-neighbor (ring right: rank - 1) and check every copy.
// (Mutation check: without the tensor lock in Window::Update this fails at once.)
TEST_F(Windows, GetsRacingUpdatesNeverSeeHalfAnUpdate) {
  if (size < 2) GTEST_SKIP();
  Use([&](starling_topology_t* t) { return starling_topology_ring(size, STARLING_RING_RIGHT, t); });
  const int source = (rank - 1 + size) % size;
  const int n = 1 << 18;  // 2 MiB: an update lasts long enough to be raced
  const double v = 1.0 + source;
  Buffer x(Kind::kF64, {n});
  for (int i = 0; i < n; ++i) x.set(i, 1.0 + rank);
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "get_race", 1, &win));
  // 600 ms and at least 20 rounds each: under ThreadSanitizer at 3 ranks on 2 cores a
  // reader managed only 9 gets in 600 ms.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  constexpr int kMinRounds = 20;
  auto more = [&](int rounds) { return rounds < kMinRounds || std::chrono::steady_clock::now() < until; };
  int rounds = 0;
  if (rank % 2 == 1) {
    const double zero = 0.0;
    starling_window_update_args_t u = OneSourceUpdate(&source, &zero, 1.0);
    for (; more(rounds); ++rounds) {
      u.self_weight = rounds % 2 == 0 ? 2.0 : 0.5;
      ASSERT_OK(starling_window_update(win, &u));
    }
  } else {
    const bool updating = source % 2 == 1;
    for (; more(rounds); ++rounds) {
      ASSERT_OK(starling_window_get(win, nullptr));
      ReadBuffer(win, source);
      const double first = x.get(0);
      // (At an odd size rank 0's source is a reader too, whose tensor its reads rewrite.)
      if (updating) ASSERT_TRUE(first == v || first == 2 * v) << first << " at get " << rounds;
      for (int i = 1; i < n; i += 509) ASSERT_EQ(x.get(i), first) << "half an update at get " << rounds;
      ASSERT_EQ(x.get(n - 1), first) << "half an update at get " << rounds;
    }
  }
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_free(win));
}

// Where this process may read its in-neighbor's memory (same host name, STARLING_SHM on,
// and the kernel allows process_vm_readv between them, as it does for Open MPI's own
// single-copy path), a get reads it there: the bytes count as shared-memory traffic on
// both sides (the source counts them when it next updates) and no message carries them.
TEST_F(Windows, GetsReadSameHostSourcesDirectly) {
  if (size < 2) GTEST_SKIP();
  Use([&](starling_topology_t* t) { return starling_topology_ring(size, STARLING_RING_RIGHT, t); });
  const int source = (rank - 1 + size) % size;
  // Whether the kernel lets this process read the source's memory (asked directly).
  struct Where {
    int64_t pid, address;
    char host[64];
  };
  int64_t probe = 42;
  Where mine{static_cast<int64_t>(getpid()), static_cast<int64_t>(reinterpret_cast<uintptr_t>(&probe)), {}};
  gethostname(mine.host, sizeof mine.host - 1);
  std::vector<Where> all(static_cast<size_t>(size));
  ASSERT_EQ(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD),
            MPI_SUCCESS);
  int64_t seen = 0;
  iovec local{&seen, sizeof seen};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(all[static_cast<size_t>(source)].address)), sizeof seen};
  const char* shm_env = std::getenv("STARLING_SHM");
  const bool direct = (shm_env == nullptr || std::string(shm_env) != "0") &&
                      std::string(mine.host) == all[static_cast<size_t>(source)].host &&  // namespace hosts
                      process_vm_readv(static_cast<pid_t>(all[static_cast<size_t>(source)].pid), &local, 1, &remote,
                                       1, 0) == static_cast<ssize_t>(sizeof seen) &&
                      seen == 42;
  // Whether this rank's reader (ring right: rank + 1) reads it directly.
  std::vector<int> directs(static_cast<size_t>(size));
  const int mine_direct = direct ? 1 : 0;
  ASSERT_EQ(MPI_Allgather(&mine_direct, 1, MPI_INT, directs.data(), 1, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  const bool read_directly = directs[static_cast<size_t>((rank + 1) % size)] != 0;

  Buffer x(Kind::kF32, {1000});
  for (int i = 0; i < 1000; ++i) x.set(i, 1.0 + rank + 0.5 * i);
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "get_direct", 1, &win));
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &before));
  const double two = 2.0;
  starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
  args.num_ranks = 1;
  args.ranks = &source;
  args.weights = &two;
  ASSERT_OK(starling_window_get(win, &args));
  ASSERT_OK(starling_get_stats(ctx, &after));
  EXPECT_EQ(after.shm_bytes_received - before.shm_bytes_received, direct ? 4000u : 0u);
  EXPECT_EQ(after.bytes_received - before.bytes_received >= 4000, true);
  ASSERT_OK(starling_barrier(ctx));
  ReadBuffer(win, source);  // the source's update also counts what its reader took
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(x.get(i), 2 * (1.0 + source + 0.5 * i));
  ASSERT_OK(starling_get_stats(ctx, &after));
  EXPECT_EQ(after.shm_bytes_sent - before.shm_bytes_sent, read_directly ? 4000u : 0u);
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_free(win));
}

TEST_F(Windows, AssociatedPCarriesPushSumWeights) {
  Use([&](starling_topology_t* t) { return starling_topology_exponential_two(size, t); });
  ASSERT_OK(starling_set_window_associated_p_enabled(ctx, 1));
  const std::vector<int> out = Neighbors(false), in = Neighbors(true);
  Buffer x(Kind::kF64, {4});
  for (int i = 0; i < 4; ++i) x.set(i, rank * 10.0);
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "ps", 1, &win));
  double p = 0;
  ASSERT_OK(starling_window_associated_p(win, &p));
  EXPECT_EQ(p, 1.0);
  // Push-sum step: send x * w and p * w to every out-neighbor, keep w (w = 1/(outdeg+1)).
  const double w = 1.0 / (out.size() + 1);
  std::vector<double> weights(out.size(), w);
  starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
  args.num_ranks = static_cast<int>(out.size());
  args.ranks = out.data();
  args.weights = weights.data();
  args.self_weight = w;
  ASSERT_OK(starling_window_accumulate(win, &x.t, &args));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_update_then_collect(win, 1));
  ASSERT_OK(starling_window_associated_p(win, &p));
  // Exp-2 is regular: in-degree = out-degree, so p returns to 1 and x/p keeps the mass.
  EXPECT_NEAR(p, w + in.size() * w, 1e-12);
  double mass = 0;
  for (int s : in) mass += w * s * 10.0;
  EXPECT_NEAR(x.get(0), w * rank * 10.0 + mass, 1e-9);
  ASSERT_OK(starling_window_set_associated_p(win, 2.0));
  ASSERT_OK(starling_window_associated_p(win, &p));
  EXPECT_EQ(p, 2.0);
  ASSERT_OK(starling_window_free(win));
  ASSERT_OK(starling_set_window_associated_p_enabled(ctx, 0));
}

TEST_F(Windows, FreeWithOperationsInFlightWaitsForThem) {
  Use([&](starling_topology_t* t) { return starling_topology_exponential_two(size, t); });
  Buffer x(Kind::kF32, {200000});
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "busy", 0, &win));
  std::vector<starling_request_t> reqs(5);
  for (auto& r : reqs) ASSERT_OK(starling_window_put_nonblocking(win, &x.t, nullptr, &r));
  ASSERT_OK(starling_window_free(win));  // runs after the queued puts
  for (auto& r : reqs) {
    EXPECT_EQ(starling_request_test(r), STARLING_SUCCESS) << starling_last_error();
    ASSERT_OK(starling_request_free(r));
  }
}

TEST_F(Windows, BadInput) {
  Use([&](starling_topology_t* t) { return starling_topology_ring(size, STARLING_RING_RIGHT, t); });
  Buffer x(Kind::kF32, {4}), other(Kind::kF32, {5}), ints(Kind::kI32, {4});
  starling_window_t win, found;
  EXPECT_ERROR(starling_window_create(ctx, &x.t, nullptr, 0, &win), STARLING_ERR_INVALID_ARGUMENT, "name");
  EXPECT_ERROR(starling_window_create(ctx, &x.t, "", 0, &win), STARLING_ERR_INVALID_ARGUMENT, "empty");
  EXPECT_ERROR(starling_window_create(ctx, &x.t, "w", 2, &win), STARLING_ERR_INVALID_ARGUMENT, "zero_init");
  EXPECT_ERROR(starling_window_create(nullptr, &x.t, "w", 0, &win), STARLING_ERR_INVALID_HANDLE, "context");
  EXPECT_ERROR(starling_window_lookup(ctx, "nope", &found), STARLING_ERR_NOT_FOUND, "'nope'");
  ASSERT_OK(starling_window_create(ctx, &x.t, "w", 0, &win));
  EXPECT_ERROR(starling_window_put(win, &other.t, nullptr), STARLING_ERR_INVALID_ARGUMENT, "float32[4]");
  EXPECT_ERROR(starling_window_accumulate(win, &ints.t, nullptr), STARLING_ERR_INVALID_ARGUMENT, "int32");
  EXPECT_ERROR(starling_window_put(win, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT, "tensor must not be NULL");
  starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
  const int not_out = (rank - 1 + size) % size;  // right ring: out-neighbor is rank + 1
  const double bad[1] = {-1.0};
  if (size >= 3) {
    args.num_ranks = 1;
    args.ranks = &not_out;
    EXPECT_ERROR(starling_window_put(win, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "not an out-neighbor");
  }
  const int out = (rank + 1) % size;
  if (size >= 2) {
    args.num_ranks = 1;
    args.ranks = &out;
    args.weights = bad;
    EXPECT_ERROR(starling_window_put(win, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "finite and >= 0");
    args.weights = nullptr;
    args.self_weight = NAN;
    EXPECT_ERROR(starling_window_put(win, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "self_weight");
  }
  starling_window_update_args_t u = STARLING_WINDOW_UPDATE_ARGS_INIT;
  const double one = 1.0;
  u.use_weights = 1;
  u.num_ranks = 1;
  u.ranks = &rank;
  u.weights = &one;
  EXPECT_ERROR(starling_window_update(win, &u), STARLING_ERR_INVALID_ARGUMENT, "not an in-neighbor");
  starling_topology_t t;
  ASSERT_OK(starling_topology_fully_connected(size, &t));
  EXPECT_ERROR(starling_set_topology(ctx, t, 0), STARLING_ERR_INVALID_USAGE, "windows exist");
  starling_topology_free(t);
  EXPECT_ERROR(starling_window_mutex_acquire(win, &rank, 1, 0), STARLING_ERR_INVALID_ARGUMENT, "for_self");
  EXPECT_ERROR(starling_window_put_nonblocking(win, &x.t, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT, "req");
  ASSERT_OK(starling_window_free(win));
  EXPECT_ERROR(starling_window_update(win, nullptr), STARLING_ERR_INVALID_HANDLE, "already freed");
  EXPECT_ERROR(starling_window_get(win, nullptr), STARLING_ERR_INVALID_HANDLE, "already freed");
  double p;
  EXPECT_ERROR(starling_window_associated_p(win, &p), STARLING_ERR_INVALID_HANDLE, "window");
}

TEST(WindowLifetime, DestroyingAContextWithLiveWindows) {
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  Buffer x(Kind::kF64, {16});
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &x.t, "left open", 0, &win));
  ASSERT_OK(starling_window_put(win, &x.t, nullptr));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_context_destroy(ctx));  // withdraws the window service's receives
  EXPECT_ERROR(starling_window_put(win, &x.t, nullptr), STARLING_ERR_SHUTDOWN, "context is being destroyed");
  // MPI (owned by the test) still works: nothing was left posted on it.
  int value = 1, sum = 0;
  MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  EXPECT_EQ(sum, world);
}

TEST_F(Windows, RanksDisagreeOnCreate) {
  if (size < 2) GTEST_SKIP();
  Buffer x(Kind::kF32, {rank == 1 ? 5 : 4});
  starling_window_t win;
  EXPECT_ERROR(starling_window_create(ctx, &x.t, "w", 0, &win), STARLING_ERR_MISMATCH, "disagree");
  Buffer y(Kind::kF32, {4});
  EXPECT_ERROR(starling_window_create(ctx, &y.t, rank == 0 ? "one" : "two", 0, &win), STARLING_ERR_MISMATCH,
               "window_create");
  ASSERT_OK(starling_barrier(ctx));
}

}  // namespace
}  // namespace starling_test
