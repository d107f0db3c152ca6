// Per-peer traffic and wait figures (starling_get_peer_stats) and the global received
// and blocked counters: every rank's bytes sent to a peer equal what that peer counted
// as received from it, the bytes follow the topology, a late peer shows the long wait.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "test_util.h"
#include "world.h"

namespace starling_test {
namespace {

using PeerStats = ContextTest;

struct Row {
  std::vector<uint64_t> bytes_sent, bytes_received, messages_sent, messages_received;
};

Row Snapshot(starling_context_t ctx, int size) {
  Row row;
  for (int peer = 0; peer < size; ++peer) {
    starling_peer_stats_t s = STARLING_PEER_STATS_INIT;
    EXPECT_OK(starling_get_peer_stats(ctx, peer, &s));
    row.bytes_sent.push_back(s.bytes_sent);
    row.bytes_received.push_back(s.bytes_received);
    row.messages_sent.push_back(s.messages_sent);
    row.messages_received.push_back(s.messages_received);
  }
  return row;
}

// Everyone's counts, [rank][peer].
std::vector<uint64_t> Gather(const std::vector<uint64_t>& mine, int size) {
  std::vector<uint64_t> all(static_cast<size_t>(size) * size);
  MPI_Allgather(mine.data(), size, MPI_UINT64_T, all.data(), size, MPI_UINT64_T, MPI_COMM_WORLD);
  return all;
}

struct Ring {
  starling_topology_t t = nullptr;
  explicit Ring(int size) { EXPECT_OK(starling_topology_ring(size, STARLING_RING_RIGHT, &t)); }
  ~Ring() { starling_topology_free(t); }
};

TEST_F(PeerStats, BytesFollowTheTopologyAndMatchTheReceiversCount) {
  Ring ring(size);
  ASSERT_OK(starling_set_topology(ctx, ring.t, 0));
  const int next = (rank + 1) % size;
  // Below the inline limit (header and payload in one message), above it, and chunked.
  for (int64_t n : {16, 8192, 1 << 20}) {
    Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n});
    for (int64_t i = 0; i < n; ++i) in.set(static_cast<size_t>(i), rank + 0.5);
    ASSERT_OK(starling_barrier(ctx));
    const Row before = Snapshot(ctx, size);
    starling_stats_t global_before = STARLING_STATS_INIT, global_after = STARLING_STATS_INIT;
    ASSERT_OK(starling_get_stats(ctx, &global_before));
    ASSERT_OK(starling_neighbor_allreduce(ctx, &in.t, &out.t, nullptr));
    const Row after = Snapshot(ctx, size);
    ASSERT_OK(starling_get_stats(ctx, &global_after));
    // Counted whichever way it went (MPI, or shared memory between ranks of one host).
    const uint64_t payload = static_cast<uint64_t>(n) * 4;
    uint64_t sum_sent = 0, sum_messages = 0;
    for (int peer = 0; peer < size; ++peer) {
      const uint64_t sent = after.bytes_sent[peer] - before.bytes_sent[peer];
      sum_sent += sent;
      sum_messages += after.messages_sent[peer] - before.messages_sent[peer];
      if (size > 1 && peer == next) {
        EXPECT_GE(sent, payload) << "n " << n;
        EXPECT_LE(sent, payload + 4096) << "n " << n << ": more than headers beside the payload";
        EXPECT_GE(after.messages_sent[peer] - before.messages_sent[peer], 1u);
      } else {
        EXPECT_EQ(sent, 0u) << "n " << n << ": rank " << rank << " is not a neighbor of " << peer;
      }
    }
    EXPECT_EQ(sum_sent, global_after.bytes_sent - global_before.bytes_sent) << "n " << n;
    EXPECT_EQ(sum_messages, global_after.messages_sent - global_before.messages_sent) << "n " << n;
    if (size > 1) {
      const int prev = (rank + size - 1) % size;
      EXPECT_GE(after.bytes_received[prev] - before.bytes_received[prev], payload) << "n " << n;
    }
  }

  // A window put travels too: through messages (request, data and the target's reply),
  // or, between ranks sharing memory (one host, STARLING_SHM on), written by this rank
  // into the target's slot, and counted by the target once it looks at its window
  // (here: window_free).
  Buffer w(Kind::kF64, {3000});
  for (size_t i = 0; i < w.numel(); ++i) w.set(i, rank);
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &w.t, "peer_stats", 1, &win));
  starling_stats_t global_before_put = STARLING_STATS_INIT, global_after_put = STARLING_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &global_before_put));
  const Row before_put = Snapshot(ctx, size);
  ASSERT_OK(starling_window_put(win, &w.t, nullptr));
  const Row after_put = Snapshot(ctx, size);
  ASSERT_OK(starling_get_stats(ctx, &global_after_put));
  const uint64_t shm_put = global_after_put.shm_bytes_sent - global_before_put.shm_bytes_sent;
  if (size > 1) {
    EXPECT_GE(after_put.bytes_sent[next] - before_put.bytes_sent[next], 3000u * 8);
    const char* shm = std::getenv("STARLING_SHM");
    if (shm != nullptr && std::string(shm) == "0") {
      EXPECT_GE(after_put.bytes_received[next] - before_put.bytes_received[next], 1u) << "no reply counted";
      EXPECT_EQ(shm_put, 0u);
    } else {
      EXPECT_EQ(shm_put, 3000u * 8) << "not shared";
      EXPECT_EQ(after_put.messages_sent[next], before_put.messages_sent[next]) << "a message for a shared put";
    }
  }
  ASSERT_OK(starling_window_free(win));

  // Once every rank has left a barrier, each message is counted on both sides:
  // what i sent to j is what j received from i, in bytes and in messages.
  ASSERT_OK(starling_barrier(ctx));
  const Row now = Snapshot(ctx, size);
  const auto sent = Gather(now.bytes_sent, size), received = Gather(now.bytes_received, size);
  const auto msent = Gather(now.messages_sent, size), mreceived = Gather(now.messages_received, size);
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) {
      EXPECT_EQ(sent[i * size + j], received[j * size + i]) << "bytes " << i << " -> " << j;
      EXPECT_EQ(msent[i * size + j], mreceived[j * size + i]) << "messages " << i << " -> " << j;
    }
  }
  starling_stats_t global = STARLING_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &global));
  uint64_t total_received = 0;
  for (uint64_t b : now.bytes_received) total_received += b;
  EXPECT_EQ(total_received, global.bytes_received);
}

TEST_F(PeerStats, ALatePeerShowsTheLongWait) {
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  Ring ring(size);
  ASSERT_OK(starling_set_topology(ctx, ring.t, 0));
  const int late = size - 1, next = (late + 1) % size, prev = (rank + size - 1) % size;
  constexpr int kSleepMs = 400;
  Buffer in(Kind::kF32, {1000}), out(Kind::kF32, {1000});
  ASSERT_OK(starling_barrier(ctx));
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  starling_peer_stats_t prev_before = STARLING_PEER_STATS_INIT, prev_after = STARLING_PEER_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &before));
  ASSERT_OK(starling_get_peer_stats(ctx, prev, &prev_before));
  if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(kSleepMs));
  ASSERT_OK(starling_neighbor_allreduce(ctx, &in.t, &out.t, nullptr));
  ASSERT_OK(starling_get_stats(ctx, &after));
  ASSERT_OK(starling_get_peer_stats(ctx, prev, &prev_after));
  EXPECT_GE(prev_after.waits, prev_before.waits + 1);
  EXPECT_GE(prev_after.wait_ns, prev_after.last_wait_ns);
  const double waited_ms = (prev_after.wait_ns - prev_before.wait_ns) / 1e6;  // over the operation's steps
  const double blocked_ms = (after.blocked_ns - before.blocked_ns) / 1e6;
  if (rank == next) {
    // Its input from the late rank left kSleepMs after the barrier (less the skew of
    // the ranks leaving the barrier: a few ms, more on a loaded machine).
    EXPECT_GE(waited_ms, kSleepMs - 150) << "the wait on late rank " << late;
    EXPECT_GE(blocked_ms, kSleepMs - 150);
  } else if (rank == late && next != late) {
    // Its own input was sent while it slept.
    EXPECT_LT(waited_ms, kSleepMs / 2) << "the wait on punctual rank " << prev;
  }
}

TEST_F(PeerStats, ProbeMeasuresEveryPeer) {
  starling_probe_args_t args = STARLING_PROBE_ARGS_INIT;
  args.repetitions = 3;
  args.bulk_bytes = 256 << 10;
  std::vector<double> latency(size + 1, -1.0), throughput(size + 1, -1.0);
  ASSERT_OK(starling_barrier(ctx));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(starling_probe_peers(ctx, &args, latency.data(), throughput.data(), size + 1));
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(latency[size], -1.0) << "wrote past size entries";
  for (int peer = 0; peer < size; ++peer) {
    starling_peer_stats_t s = STARLING_PEER_STATS_INIT;
    ASSERT_OK(starling_get_peer_stats(ctx, peer, &s));
    if (peer == rank) {
      EXPECT_EQ(latency[peer], 0.0);
      EXPECT_EQ(throughput[peer], 0.0);
      EXPECT_EQ(s.probe_latency_ns, 0u);
      continue;
    }
    // The best of 3 round trips is at most their mean, so each figure is bounded by the
    // time the whole call took.
    EXPECT_GT(latency[peer], 0.0) << "peer " << peer;
    EXPECT_LE(2 * latency[peer], elapsed / args.repetitions) << "peer " << peer;
    EXPECT_GT(throughput[peer], 0.0) << "peer " << peer;
    EXPECT_LE(args.bulk_bytes / throughput[peer], elapsed / args.repetitions) << "peer " << peer;
    // The same figures in the peer stats (in ns and bytes/s, rounded).
    EXPECT_NEAR(static_cast<double>(s.probe_latency_ns), latency[peer] * 1e9, 1.0) << "peer " << peer;
    EXPECT_NEAR(static_cast<double>(s.probe_bytes_per_second), throughput[peer], 1.0) << "peer " << peer;
  }
  // Defaults, outputs optional.
  ASSERT_OK(starling_probe_peers(ctx, nullptr, nullptr, nullptr, 0));
}

TEST_F(PeerStats, ProbeWithDifferentArgsIsAMismatchEverywhere) {
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  starling_probe_args_t args = STARLING_PROBE_ARGS_INIT;
  args.repetitions = rank == 0 ? 2 : 3;
  EXPECT_ERROR(starling_probe_peers(ctx, &args, nullptr, nullptr, 0), STARLING_ERR_MISMATCH, "probe_peers");
  // The context goes on: an exact allreduce.
  Buffer x(Kind::kF64, {4}), y(Kind::kF64, {4});
  for (size_t i = 0; i < 4; ++i) x.set(i, rank + i);
  ASSERT_OK(starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, nullptr));
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(y.get(i), size * (size - 1) / 2.0 + size * static_cast<double>(i));
}

TEST_F(PeerStats, BadInput) {
  starling_peer_stats_t s = STARLING_PEER_STATS_INIT;
  EXPECT_ERROR(starling_get_peer_stats(ctx, 0, nullptr), STARLING_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERROR(starling_get_peer_stats(ctx, -1, &s), STARLING_ERR_INVALID_ARGUMENT, "peer is -1");
  EXPECT_ERROR(starling_get_peer_stats(ctx, size, &s), STARLING_ERR_INVALID_ARGUMENT, "ranks are 0 ..");
  EXPECT_ERROR(starling_get_peer_stats(nullptr, 0, &s), STARLING_ERR_INVALID_HANDLE, "");
  s.struct_size = 0;
  EXPECT_ERROR(starling_get_peer_stats(ctx, 0, &s), STARLING_ERR_INVALID_ARGUMENT, "STARLING_PEER_STATS_INIT");
  // starling_probe_peers: refused on the calling rank before anything travels.
  starling_probe_args_t args = STARLING_PROBE_ARGS_INIT;
  std::vector<double> out(size);
  args.repetitions = -1;
  EXPECT_ERROR(starling_probe_peers(ctx, &args, nullptr, nullptr, 0), STARLING_ERR_INVALID_ARGUMENT, "repetitions is -1");
  args.repetitions = 1001;
  EXPECT_ERROR(starling_probe_peers(ctx, &args, nullptr, nullptr, 0), STARLING_ERR_INVALID_ARGUMENT, "give 1 to 1000");
  args.repetitions = 0;
  args.bulk_bytes = (uint64_t{1} << 30) + 1;
  EXPECT_ERROR(starling_probe_peers(ctx, &args, nullptr, nullptr, 0), STARLING_ERR_INVALID_ARGUMENT, "bulk_bytes is");
  args.bulk_bytes = 0;
  EXPECT_ERROR(starling_probe_peers(ctx, &args, out.data(), nullptr, size - 1), STARLING_ERR_INVALID_ARGUMENT,
               "count is");
  args.struct_size = 0;
  EXPECT_ERROR(starling_probe_peers(ctx, &args, nullptr, nullptr, 0), STARLING_ERR_INVALID_ARGUMENT,
               "STARLING_PROBE_ARGS_INIT");
  EXPECT_ERROR(starling_probe_peers(nullptr, nullptr, nullptr, nullptr, 0), STARLING_ERR_INVALID_HANDLE, "");
  // After all that, the ranks still agree (nothing was sent): a probe works.
  ASSERT_OK(starling_probe_peers(ctx, nullptr, out.data(), nullptr, size));

  // An older caller's smaller struct gets the fields it knows, nothing beyond.
  struct {
    size_t struct_size;
    uint64_t messages_sent;
    uint64_t guard;
  } old = {sizeof(size_t) + sizeof(uint64_t), 0, 0x5a5a5a5a5a5a5a5aull};
  ASSERT_OK(starling_get_peer_stats(ctx, 0, reinterpret_cast<starling_peer_stats_t*>(&old)));
  EXPECT_EQ(old.guard, 0x5a5a5a5a5a5a5a5aull);
}

}  // namespace
}  // namespace starling_test
