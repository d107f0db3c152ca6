// reduce_scatter and alltoall (equal blocks and per-rank counts) for every dtype and
// op, small (gather path) and large (ring path) sizes, blocking and nonblocking, in
// place, against references every rank computes independently in float64; their bad
// input and mismatches across ranks.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>

#include "test_util.h"

namespace starling_test {
namespace {

using Scatter = ContextTest;

// Elements per block: 0, tiny, and 40000 (int8 at 2 ranks: 80 KB, above the gather
// threshold, so the ring runs for every dtype).
const size_t kBlocks[] = {0, 1, 7, 40000};

std::vector<starling_reduce_op_t> OpsFor(Kind k) {
  std::vector<starling_reduce_op_t> ops = {STARLING_SUM, STARLING_MIN, STARLING_MAX};
  if (IsFloat(k)) ops.push_back(STARLING_AVERAGE);
  return ops;
}

void Fill(Buffer& b, int rank, int salt) {
  for (size_t i = 0; i < b.numel(); ++i) b.set(i, Value(b.kind, rank, i, salt));
}

// out holds elements [first, first + out.numel()) of the reduction.
void CheckBlock(Buffer& out, size_t first, starling_reduce_op_t op, int size, int salt, const std::string& what) {
  const double scale = op == STARLING_AVERAGE ? 4.0 : 4.0 * size;
  for (size_t i = 0; i < out.numel(); ++i) {
    ASSERT_NEAR(out.get(i), ReducedValue(out.kind, op, size, first + i, salt), Tolerance(out.kind, scale))
        << what << " element " << i;
  }
}

TEST_F(Scatter, ReduceScatterEqualBlocksEveryDtypeOpSize) {
  for (Kind k : kAllKinds) {
    for (size_t block : kBlocks) {
      for (starling_reduce_op_t op : OpsFor(k)) {
        const int salt = static_cast<int>(block) + op;
        Buffer in(k, {static_cast<int64_t>(block) * size}), out(k, {static_cast<int64_t>(block)});
        Fill(in, rank, salt);
        ASSERT_OK(starling_reduce_scatter(ctx, &in.t, &out.t, nullptr, op, "rs"));
        CheckBlock(out, block * static_cast<size_t>(rank), op, size, salt,
                   std::string(KindName(k)) + " block " + std::to_string(block) + " op " + std::to_string(op));
      }
    }
  }
}

// Block r has counts[r] elements: varied sizes, an empty block, both paths.
std::vector<int64_t> VaryingCounts(int size, int64_t scale) {
  std::vector<int64_t> counts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) counts[static_cast<size_t>(r)] = r == 1 ? 0 : scale * (r + 1) + 3;
  return counts;
}

TEST_F(Scatter, ReduceScatterPerRankCountsInPlaceAndNot) {
  for (Kind k : {Kind::kF32, Kind::kF64, Kind::kBF16, Kind::kI32, Kind::kU8}) {
    for (int64_t scale : {int64_t{2}, int64_t{30000}}) {
      const std::vector<int64_t> counts = VaryingCounts(size, scale);
      const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
      const size_t first = static_cast<size_t>(std::accumulate(counts.begin(), counts.begin() + rank, int64_t{0}));
      for (starling_reduce_op_t op : OpsFor(k)) {
        const int salt = static_cast<int>(scale) + op;
        const std::string what = std::string(KindName(k)) + " scale " + std::to_string(scale);
        Buffer in(k, {total}), out(k, {counts[static_cast<size_t>(rank)]});
        Fill(in, rank, salt);
        ASSERT_OK(starling_reduce_scatter(ctx, &in.t, &out.t, counts.data(), op, nullptr));
        CheckBlock(out, first, op, size, salt, what);
        // In place: out is this rank's block of in.
        Fill(in, rank, salt);
        DLTensor own = in.t;
        int64_t own_shape = counts[static_cast<size_t>(rank)];
        own.shape = &own_shape;
        own.byte_offset = first * KindSize(k);
        ASSERT_OK(starling_reduce_scatter(ctx, &in.t, &own, counts.data(), op, nullptr));
        Buffer view(k, {own_shape});
        if (own_shape > 0) std::memcpy(view.bytes(), in.bytes() + own.byte_offset, own_shape * KindSize(k));
        CheckBlock(view, first, op, size, salt, what + " in place");
      }
    }
  }
}

TEST_F(Scatter, ManyNonblockingInFlight) {
  constexpr int kCount = 12;
  std::vector<std::unique_ptr<Buffer>> ins, outs;
  std::vector<starling_request_t> reqs(kCount);
  for (int j = 0; j < kCount; ++j) {
    const size_t block = j % 3 == 0 ? 20000 : 5;
    ins.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{static_cast<int64_t>(block) * size}));
    outs.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{static_cast<int64_t>(block) * size}));
    Fill(*ins.back(), rank, j);
    if (j % 2 == 0) {
      outs.back() = std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{static_cast<int64_t>(block)});
      ASSERT_OK(starling_reduce_scatter_nonblocking(ctx, &ins[j]->t, &outs[j]->t, nullptr, STARLING_SUM, nullptr,
                                                    &reqs[j]));
    } else {
      ASSERT_OK(starling_alltoall_nonblocking(ctx, &ins[j]->t, &outs[j]->t, nullptr, nullptr, nullptr, &reqs[j]));
    }
  }
  for (int j = 0; j < kCount; ++j) {
    ASSERT_OK(starling_request_wait(reqs[j]));
    ASSERT_OK(starling_request_free(reqs[j]));
    const size_t block = j % 3 == 0 ? 20000 : 5;
    if (j % 2 == 0) {
      CheckBlock(*outs[j], block * static_cast<size_t>(rank), STARLING_SUM, size, j, "request " + std::to_string(j));
    } else {
      for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < block; ++i)
          ASSERT_EQ(outs[j]->get(q * block + i), Value(Kind::kF32, q, rank * block + i, j)) << "request " << j;
    }
  }
}

TEST_F(Scatter, AlltoallEqualBlocksEveryDtype) {
  for (Kind k : kAllKinds) {
    for (size_t block : kBlocks) {
      const int salt = static_cast<int>(block);
      Buffer in(k, {static_cast<int64_t>(block) * size, 1}), out(k, {static_cast<int64_t>(block) * size});
      Fill(in, rank, salt);
      ASSERT_OK(starling_alltoall(ctx, &in.t, &out.t, nullptr, nullptr, "a2a"));
      // Block q of out is block `rank` of rank q's in: moved, so exact.
      for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < block; ++i)
          ASSERT_EQ(out.get(q * block + i), Value(k, q, rank * block + i, salt))
              << KindName(k) << " block " << block << " from rank " << q << " element " << i;
    }
  }
}

// Every rank on one host with shared memory on: each rank copies its blocks straight out
// of its peers' inputs (the board's counts round carries their addresses), so the bytes
// it received through shared memory include every peer's block for it; through messages
// only the counts round would count there. The inputs change right after the call, as
// a program's next step changes them: the second round kept them until every read.
TEST_F(Scatter, AlltoallOnOneHostReadsThePeersInputs) {
  int local = 0;
  ASSERT_OK(starling_local_size(ctx, &local));
  const char* shm = std::getenv("STARLING_SHM");
  if (size < 2 || local != size || (shm != nullptr && std::string(shm) == "0"))
    GTEST_SKIP() << "needs every rank on this host, shared memory on";
  const size_t block = 20000;  // floats: 80 KB per block, above the gather path
  for (int round = 0; round < 5; ++round) {
    Buffer in(Kind::kF32, {static_cast<int64_t>(block) * size}), out(Kind::kF32, {static_cast<int64_t>(block) * size});
    Fill(in, rank, round);
    starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
    ASSERT_OK(starling_get_stats(ctx, &before));
    ASSERT_OK(starling_alltoall(ctx, &in.t, &out.t, nullptr, nullptr, nullptr));
    ASSERT_OK(starling_get_stats(ctx, &after));
    Fill(in, rank, round + 100);
    for (int q = 0; q < size; ++q)
      for (size_t i = 0; i < block; ++i)
        ASSERT_EQ(out.get(q * block + i), Value(Kind::kF32, q, rank * block + i, round)) << "from rank " << q;
    EXPECT_GE(after.shm_bytes_received - before.shm_bytes_received, (size - 1) * block * sizeof(float))
        << "the blocks did not come through shared memory";
    if (round % 2 == 1 && rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a slow rank
  }
}

// What rank r sends to rank q, in elements.
int64_t Sends(int r, int q, int64_t scale) { return ((r + 2 * q) % 3) * scale + (r == q ? 1 : 0); }

// Per-rank counts whose inputs sit on both sides of the largest input that travels with
// the counts on the board (a slot of 64 KiB + 64 bytes holds 2 + 2 size words and the
// input): all within it (one board round, no message), all over it, and mixed (rank 0
// over, the others within: every rank must fall back alike).
TEST_F(Scatter, AlltoallSmallInputsWithTheCountsOnOneHost) {
  int local = 0;
  ASSERT_OK(starling_local_size(ctx, &local));
  const char* shm = std::getenv("STARLING_SHM");
  const bool board = size >= 2 && local == size && !(shm != nullptr && std::string(shm) == "0");
  const int64_t limit = static_cast<int64_t>(((64 << 10) + 64 - (2 + 2 * size) * 8) / sizeof(float));
  // 256 floats: blocks that would otherwise go by message; -1: mixed.
  for (int64_t mine : {int64_t{256}, limit, limit - 1, limit + 1, int64_t{-1}}) {
    // Rank r sends total_of(r) split as evenly as the counts allow; every rank knows all totals.
    auto total_of = [&](int r) { return mine > 0 ? mine : (r == 0 ? limit + 1 : limit - 3); };
    auto block = [&](int r, int q) { return total_of(r) / size + (q < total_of(r) % size ? 1 : 0); };
    const int64_t total = total_of(rank);
    for (int round = 0; round < 3; ++round) {
      std::vector<int64_t> send(size), recv(size);
      for (int q = 0; q < size; ++q) {
        send[q] = block(rank, q);
        recv[q] = block(q, rank);
      }
      const int64_t out_total = std::accumulate(recv.begin(), recv.end(), int64_t{0});
      Buffer in(Kind::kF32, {total}), out(Kind::kF32, {out_total});
      Fill(in, rank, round);
      starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
      ASSERT_OK(starling_get_stats(ctx, &before));
      ASSERT_OK(starling_alltoall(ctx, &in.t, &out.t, send.data(), recv.data(), nullptr));
      ASSERT_OK(starling_get_stats(ctx, &after));
      Fill(in, rank, round + 100);  // the input may change as soon as the call returns
      size_t at = 0;
      for (int q = 0; q < size; ++q) {
        int64_t from = 0;
        for (int p = 0; p < rank; ++p) from += block(q, p);
        for (int64_t i = 0; i < recv[q]; ++i, ++at)
          ASSERT_EQ(out.get(at), Value(Kind::kF32, q, static_cast<size_t>(from + i), round))
              << "input " << mine << " from rank " << q << " element " << i;
      }
      if (board && mine > 0 && mine <= limit)
        EXPECT_EQ(after.messages_sent, before.messages_sent) << "inputs of " << mine * 4 << " bytes sent messages";
      if (round == 1 && rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a slow rank
    }
  }
}

TEST_F(Scatter, AlltoallPerRankCounts) {
  for (Kind k : {Kind::kF16, Kind::kF64, Kind::kI8, Kind::kI64}) {
    for (int64_t scale : {int64_t{3}, int64_t{50000}}) {
      std::vector<int64_t> send(size), recv(size);
      for (int q = 0; q < size; ++q) {
        send[q] = Sends(rank, q, scale);
        recv[q] = Sends(q, rank, scale);
      }
      const int64_t in_total = std::accumulate(send.begin(), send.end(), int64_t{0});
      const int64_t out_total = std::accumulate(recv.begin(), recv.end(), int64_t{0});
      const int salt = static_cast<int>(scale);
      Buffer in(k, {in_total}), out(k, {out_total});
      Fill(in, rank, salt);
      starling_request_t req;
      ASSERT_OK(starling_alltoall_nonblocking(ctx, &in.t, &out.t, send.data(), recv.data(), nullptr, &req));
      std::fill(send.begin(), send.end(), -7);  // copied at the call
      ASSERT_OK(starling_request_wait(req));
      ASSERT_OK(starling_request_free(req));
      size_t at = 0;
      for (int q = 0; q < size; ++q) {
        int64_t from = 0;  // where rank q's block for this rank starts in q's in
        for (int p = 0; p < rank; ++p) from += Sends(q, p, scale);
        for (int64_t i = 0; i < recv[q]; ++i, ++at)
          ASSERT_EQ(out.get(at), Value(k, q, static_cast<size_t>(from + i), salt))
              << KindName(k) << " scale " << scale << " from rank " << q << " element " << i;
      }
    }
  }
}

TEST_F(Scatter, BadInputFailsOnTheCallingThread) {
  Buffer in(Kind::kF32, {4 * size}), out(Kind::kF32, {4}), wide(Kind::kF64, {4}), ints(Kind::kI32, {4 * size}),
      ints_out(Kind::kI32, {4});
  std::vector<int64_t> counts(size, 4);
  EXPECT_ERROR(starling_reduce_scatter(ctx, nullptr, &out.t, nullptr, STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "in");
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, nullptr, nullptr, STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERROR(starling_reduce_scatter(nullptr, &in.t, &out.t, nullptr, STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_HANDLE, "");
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &wide.t, nullptr, STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "same dtype");
  Buffer five(Kind::kF32, {5}), odd(Kind::kF32, {4 * size + 1}), odd_out(Kind::kF32, {4 * size + 1});
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &five.t, nullptr, STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "times out's elements");
  // out overlapping in other than as this rank's block.
  DLTensor shifted = out.t;
  shifted.data = in.bytes() + (rank == 0 ? 4 : 0);
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &shifted, nullptr, STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "overlap");
  EXPECT_ERROR(starling_reduce_scatter(ctx, &ints.t, &ints_out.t, nullptr, STARLING_AVERAGE, nullptr),
               STARLING_ERR_UNSUPPORTED, "floating-point");
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &out.t, nullptr, static_cast<starling_reduce_op_t>(9), nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "reduce op 9");
  counts[0] = -1;
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &out.t, counts.data(), STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "counts[0] is negative");
  counts[0] = 5;
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &out.t, counts.data(), STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "sum to");
  Buffer all(Kind::kF32, {4 * size});
  EXPECT_ERROR(starling_alltoall(ctx, &in.t, &wide.t, nullptr, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "same dtype");
  if (size > 1) {
    EXPECT_ERROR(starling_alltoall(ctx, &odd.t, &odd_out.t, nullptr, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
                 "multiple of size()");
  }
  EXPECT_ERROR(starling_alltoall(ctx, &in.t, &five.t, nullptr, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "same element count");
  EXPECT_ERROR(starling_alltoall(ctx, &in.t, &in.t, nullptr, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "in place");
  EXPECT_ERROR(starling_alltoall(ctx, &in.t, &all.t, counts.data(), nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "or neither");
  std::vector<int64_t> send(size, 4), recv(size, 4);
  send[size - 1] = -2;
  EXPECT_ERROR(starling_alltoall(ctx, &in.t, &all.t, send.data(), recv.data(), nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "is negative");
  send[size - 1] = 4;
  recv[0] = 3;
  EXPECT_ERROR(starling_alltoall(ctx, &in.t, &all.t, send.data(), recv.data(), nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "recv_counts sum to");
  starling_request_t req = nullptr;
  EXPECT_ERROR(starling_alltoall_nonblocking(ctx, &in.t, &all.t, nullptr, nullptr, nullptr, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "req");
  EXPECT_ERROR(starling_reduce_scatter_nonblocking(ctx, &in.t, &wide.t, nullptr, STARLING_SUM, nullptr, &req),
               STARLING_ERR_INVALID_ARGUMENT, "same dtype");
  EXPECT_EQ(req, nullptr);
  // Nothing was queued: the context still works.
  ASSERT_OK(starling_reduce_scatter(ctx, &in.t, &out.t, nullptr, STARLING_SUM, nullptr));
}

// A rank whose counts disagree with themselves (what it sends to itself is not what it
// expects from itself): MISMATCH at every size; at one rank this overflowed out (fuzzer).
TEST_F(Scatter, AlltoallSelfCountsDisagreeing) {
  std::vector<int64_t> send(size, 4), recv(size, 4);
  recv[rank] = 3;
  Buffer a(Kind::kF32, {4 * size}), b(Kind::kF32, {4 * size - 1});
  EXPECT_ERROR(starling_alltoall(ctx, &a.t, &b.t, send.data(), recv.data(), "self"), STARLING_ERR_MISMATCH,
               "rank 0 sends 4 elements to rank 0, which expects 3");
  Buffer c(Kind::kF32, {4 * size}), d(Kind::kF32, {4 * size});
  Fill(c, rank, 0);
  ASSERT_OK(starling_alltoall(ctx, &c.t, &d.t, nullptr, nullptr, nullptr));  // the context still works
}

TEST_F(Scatter, RanksDisagreeingFailWithMismatchEverywhere) {
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  Buffer in(Kind::kF32, {4 * size}), out(Kind::kF32, {4});
  // Different counts on rank 0 (each rank's own call is valid).
  std::vector<int64_t> counts(size, 4);
  if (rank == 0) {
    counts[0] = 3;
    counts[1] = 5;
  }
  Buffer own(Kind::kF32, {counts[rank]});
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &own.t, counts.data(), STARLING_SUM, nullptr),
               STARLING_ERR_MISMATCH, "reduce_scatter");
  // Another op on rank 0.
  if (rank == 0) {
    Buffer whole(Kind::kF32, {4 * size});
    EXPECT_ERROR(starling_allreduce(ctx, &in.t, &whole.t, STARLING_SUM, nullptr), STARLING_ERR_MISMATCH, "");
  } else {
    EXPECT_ERROR(starling_reduce_scatter(ctx, &in.t, &out.t, nullptr, STARLING_SUM, nullptr), STARLING_ERR_MISMATCH,
                 "");
  }
  // alltoall: rank 1 expects 3 elements from rank 0, which sends 4.
  std::vector<int64_t> send(size, 4), recv(size, 4);
  if (rank == 1) recv[0] = 3;
  Buffer a(Kind::kF32, {4 * size}), b(Kind::kF32, {std::accumulate(recv.begin(), recv.end(), int64_t{0})});
  EXPECT_ERROR(starling_alltoall(ctx, &a.t, &b.t, send.data(), recv.data(), "x"), STARLING_ERR_MISMATCH,
               "rank 0 sends 4 elements to rank 1, which expects 3");
  // alltoall with another dtype on the last rank.
  Buffer d_in(rank == size - 1 ? Kind::kI32 : Kind::kF32, {2 * size}),
      d_out(rank == size - 1 ? Kind::kI32 : Kind::kF32, {2 * size});
  EXPECT_ERROR(starling_alltoall(ctx, &d_in.t, &d_out.t, nullptr, nullptr, nullptr), STARLING_ERR_MISMATCH,
               "alltoall");
  // The context still works.
  Fill(in, rank, 0);
  ASSERT_OK(starling_reduce_scatter(ctx, &in.t, &out.t, nullptr, STARLING_SUM, nullptr));
  CheckBlock(out, 4 * static_cast<size_t>(rank), STARLING_SUM, size, 0, "after mismatches");
}

}  // namespace
}  // namespace starling_test
