// Compressed allreduce and CHOCO neighbor averaging against independent float64
// references: exact for casts and top-k, statistical for random-k, error feedback
// recovering the exact sum over steps, CHOCO consensus, mismatch and bad input.
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <cmath>
#include <numeric>
#include <vector>

#include "test_util.h"

using namespace starling_test;

namespace {

starling_compression_t Compression(int kind, int64_t k = 0, double ratio = 0.0) {
  starling_compression_t c = STARLING_COMPRESSION_INIT;
  c.compressor = kind;
  c.k = k;
  c.ratio = ratio;
  c.seed = 1234;
  return c;
}

// Rank r's element i at step t: varied magnitudes, not representable in 16 bits.
double Noise(int r, size_t i, int t = 0) {
  const double u = std::sin(0.37 * static_cast<double>(i) + 1.3 * r + 0.71 * t);
  return u * (1.0 + 0.01 * static_cast<double>((i * 7 + static_cast<size_t>(r)) % 13)) + 1e-4 * r;
}

void Fill(Buffer& b, int r, int t = 0) {
  for (size_t i = 0; i < b.numel(); ++i) b.set(i, Noise(r, i, t));
}

// The k indices of largest magnitude (ties: lower index), as the library picks them.
std::vector<size_t> TopK(const std::vector<double>& v, size_t k) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  order.resize(k);
  return order;
}

using Compress = ContextTest;

TEST_F(Compress, CastsMatchReferenceExactly) {
  for (int kind : {STARLING_COMPRESS_FLOAT16, STARLING_COMPRESS_BFLOAT16}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{70000}}) {
      Buffer in(Kind::kF32, {static_cast<int64_t>(n)}), out(Kind::kF32, {static_cast<int64_t>(n)});
      Fill(in, rank);
      const starling_compression_t c = Compression(kind);
      ASSERT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, "cast", &c));
      for (size_t i = 0; i < n; ++i) {
        double sum = 0;
        for (int r = 0; r < size; ++r) {
          const double x = static_cast<float>(Noise(r, i));
          sum += kind == STARLING_COMPRESS_FLOAT16 ? DecodeF16(EncodeF16(x)) : DecodeBF16(EncodeBF16(x));
        }
        ASSERT_EQ(out.get(i), static_cast<float>(sum)) << "kind " << kind << " n " << n << " i " << i;
      }
    }
  }
}

TEST_F(Compress, TopKMatchesReferenceExactly) {
  for (Kind dtype : {Kind::kF64, Kind::kF32}) {
    const size_t n = 257, k = 19;
    Buffer in(dtype, {static_cast<int64_t>(n)}), out(dtype, {static_cast<int64_t>(n)});
    Fill(in, rank);
    in.set(3, 2.5);  // ties between equal magnitudes go to the lower index
    in.set(4, -2.5);
    in.set(5, 2.5);
    const starling_compression_t c = Compression(STARLING_COMPRESS_TOPK, static_cast<int64_t>(k));
    ASSERT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_AVERAGE, "topk", &c));
    std::vector<double> sum(n, 0.0);
    for (int r = 0; r < size; ++r) {
      std::vector<double> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = dtype == Kind::kF32 ? static_cast<float>(Noise(r, i)) : Noise(r, i);
      v[3] = 2.5, v[4] = -2.5, v[5] = 2.5;
      for (size_t i : TopK(v, k)) sum[i] += v[i];
    }
    for (size_t i = 0; i < n; ++i) {
      const double expected = sum[i] / size;
      ASSERT_EQ(out.get(i), dtype == Kind::kF32 ? static_cast<float>(expected) : expected) << i;
    }
  }
  // ratio instead of k: ceil(0.1 * 50) = 5 elements per rank.
  Buffer in(Kind::kF64, {5, 10}), out(Kind::kF64, {5, 10});
  Fill(in, rank);
  const starling_compression_t c = Compression(STARLING_COMPRESS_TOPK, 0, 0.1);
  ASSERT_OK(starling_allreduce_compressed(ctx, &in.t, &in.t, STARLING_SUM, nullptr, &c));  // in place
  if (size == 1) {
    int nonzero = 0;
    for (size_t i = 0; i < 50; ++i) nonzero += in.get(i) != 0.0;
    EXPECT_EQ(nonzero, 5);
  }
}

TEST_F(Compress, RandomKSharesIndicesAndIsUniform) {
  const size_t n = 40, k = 10;
  const int steps = 400;
  std::vector<int> hits(n, 0);
  Buffer in(Kind::kF64, {static_cast<int64_t>(n)}), out(Kind::kF64, {static_cast<int64_t>(n)});
  for (int t = 0; t < steps; ++t) {
    for (size_t i = 0; i < n; ++i) in.set(i, 1.0 + rank + 0.5 * static_cast<double>(i));
    const starling_compression_t c = Compression(STARLING_COMPRESS_RANDOMK, static_cast<int64_t>(k));
    ASSERT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, "randk", &c));
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      double expected = 0;
      for (int r = 0; r < size; ++r) expected += 1.0 + r + 0.5 * static_cast<double>(i);
      // Every rank picked the same indices: an element is the full sum or 0.
      if (out.get(i) != 0.0) {
        ASSERT_EQ(out.get(i), expected) << "step " << t << " element " << i;
        ++hits[i];
        ++kept;
      }
    }
    ASSERT_EQ(kept, k) << "step " << t;
  }
  // Each element is kept with probability k/n = 1/4: 100 +- 8.7 of 400 steps.
  for (size_t i = 0; i < n; ++i) {
    EXPECT_GT(hits[i], 100 - 45) << i;
    EXPECT_LT(hits[i], 100 + 45) << i;
  }
  // Identical on every rank: the maximum over ranks equals the local result.
  Buffer check(Kind::kF64, {static_cast<int64_t>(n)});
  ASSERT_OK(starling_allreduce(ctx, &out.t, &check.t, STARLING_MAX, nullptr));
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(check.get(i), out.get(i));
}

TEST_F(Compress, SignMatchesReference) {
  const size_t n = 1001;
  Buffer in(Kind::kF32, {static_cast<int64_t>(n)}), out(Kind::kF32, {static_cast<int64_t>(n)});
  Fill(in, rank);
  in.set(7, 0.0);  // +0 is positive
  const starling_compression_t c = Compression(STARLING_COMPRESS_SIGN);
  ASSERT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, "sign", &c));
  std::vector<double> sum(n, 0.0);
  for (int r = 0; r < size; ++r) {
    std::vector<double> v(n);
    double l1 = 0;
    for (size_t i = 0; i < n; ++i) {
      v[i] = i == 7 ? 0.0 : static_cast<float>(Noise(r, i));
      l1 += std::fabs(v[i]);
    }
    for (size_t i = 0; i < n; ++i) sum[i] += (v[i] < 0 ? -1.0 : 1.0) * l1 / static_cast<double>(n);
  }
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(out.get(i), sum[i], 1e-6 * std::fabs(sum[i]) + 1e-7) << i;
}

// With error feedback nothing is lost: after the inputs stop (zeros), the residuals
// drain and the outputs over all steps add up to the sum of all inputs.
TEST_F(Compress, ErrorFeedbackRecoversExactSum) {
  struct Case { int kind; int64_t k; int drain; double tolerance; };
  const size_t n = 30;
  // float16 cannot hold residuals below its smallest subnormal (2^-24): a few 1e-8 stay.
  for (const Case& cs : {Case{STARLING_COMPRESS_TOPK, 4, 9, 1e-11}, Case{STARLING_COMPRESS_FLOAT16, 0, 6, 1e-7 * size},
                         Case{STARLING_COMPRESS_BFLOAT16, 0, 10, 1e-11}}) {
    starling_compression_t c = Compression(cs.kind, cs.k);
    c.error_feedback = 1;
    Buffer in(Kind::kF64, {static_cast<int64_t>(n)}), out(Kind::kF64, {static_cast<int64_t>(n)});
    std::vector<double> total(n, 0.0), expected(n, 0.0);
    const int steps = 5;
    for (int t = 0; t < steps + cs.drain; ++t) {
      for (size_t i = 0; i < n; ++i) in.set(i, t < steps ? Noise(rank, i, t) : 0.0);
      ASSERT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, "ef", &c));
      for (size_t i = 0; i < n; ++i) total[i] += out.get(i);
    }
    for (int t = 0; t < steps; ++t)
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < n; ++i) expected[i] += Noise(r, i, t);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(total[i], expected[i], cs.tolerance) << "kind " << cs.kind << " i " << i;
    ASSERT_OK(starling_compression_reset(ctx, "ef"));
  }
}

// CHOCO: repeated compressed averaging reaches the exact average of the start values.
TEST_F(Compress, ChocoReachesConsensus) {
  // Step sizes and step counts measured: sign (one bit per element) needs a small gamma
  // and is slow on long tensors (its contraction is ~1/n per step), so it runs on 16.
  struct Case { int kind; int64_t k; double gamma; int steps; size_t n; };
  for (const Case& cs : {Case{STARLING_COMPRESS_FLOAT16, 0, 1.0, 60, 64}, Case{STARLING_COMPRESS_BFLOAT16, 0, 1.0, 80, 64},
                         Case{STARLING_COMPRESS_TOPK, 16, 0.4, 400, 64}, Case{STARLING_COMPRESS_RANDOMK, 16, 0.3, 700, 64},
                         Case{STARLING_COMPRESS_SIGN, 0, 0.3, 450, 16}}) {
    const size_t n = cs.n;
    starling_compression_t c = Compression(cs.kind, cs.k);
    c.gamma = cs.gamma;

    starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
    args.name = "choco";
    Buffer x(Kind::kF64, {static_cast<int64_t>(n)});
    Fill(x, rank);
    std::vector<double> mean(n, 0.0);
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < n; ++i) mean[i] += Noise(r, i) / size;
    for (int t = 0; t < cs.steps; ++t) ASSERT_OK(starling_neighbor_allreduce_compressed(ctx, &x.t, &x.t, &args, &c));
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(x.get(i) - mean[i]));
    EXPECT_LT(worst, 1e-6) << "compressor " << cs.kind << " after " << cs.steps << " steps";
    ASSERT_OK(starling_compression_reset(ctx, "choco"));
  }
}

TEST_F(Compress, StatsCountBytesBeforeAndAfter) {
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &before));
  Buffer in(Kind::kF32, {1000}), out(Kind::kF32, {1000});
  Fill(in, rank);
  const starling_compression_t c = Compression(STARLING_COMPRESS_TOPK, 10);
  ASSERT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, nullptr, &c));
  ASSERT_OK(starling_get_stats(ctx, &after));
  EXPECT_EQ(after.bytes_before_compression - before.bytes_before_compression, uint64_t(size - 1) * 4000);
  EXPECT_EQ(after.bytes_after_compression - before.bytes_after_compression, uint64_t(size - 1) * 10 * 8);
  // An older caller's struct (without the new fields) still works.
  starling_stats_t old = STARLING_STATS_INIT;
  old.struct_size = offsetof(starling_stats_t, bytes_before_compression);
  old.bytes_before_compression = 77;
  ASSERT_OK(starling_get_stats(ctx, &old));
  EXPECT_EQ(old.bytes_before_compression, 77u);
}

TEST_F(Compress, NonblockingInterleavedWithPlainOps) {
  const size_t n = 100;
  Buffer a(Kind::kF64, {100}), b(Kind::kF64, {100}), c(Kind::kF64, {100});
  Buffer oa(Kind::kF64, {100}), ob(Kind::kF64, {100}), oc(Kind::kF64, {100});
  Fill(a, rank, 1), Fill(b, rank, 2), Fill(c, rank, 3);
  const starling_compression_t f16 = Compression(STARLING_COMPRESS_FLOAT16);
  starling_compression_t choco = Compression(STARLING_COMPRESS_FLOAT16);
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.name = "nb.choco";
  starling_request_t r[3];
  ASSERT_OK(starling_neighbor_allreduce_nonblocking(ctx, &a.t, &oa.t, nullptr, &r[0]));
  ASSERT_OK(starling_neighbor_allreduce_compressed_nonblocking(ctx, &b.t, &ob.t, &args, &choco, &r[1]));
  ASSERT_OK(starling_allreduce_compressed_nonblocking(ctx, &c.t, &oc.t, STARLING_SUM, "nb", &f16, &r[2]));
  for (auto& req : r) {
    EXPECT_OK(starling_request_wait(req));
    EXPECT_OK(starling_request_free(req));
  }
  // The first CHOCO step from zero copies: x + gamma * sum_j w_j (fp16(x_j) - fp16(x)).
  int in_count = 0;
  starling_in_neighbors(ctx, nullptr, 0, &in_count);  // sets the count, then fails on capacity
  std::vector<int> sources(static_cast<size_t>(in_count));
  ASSERT_OK(starling_in_neighbors(ctx, sources.data(), in_count, &in_count));
  for (size_t i = 0; i < n; ++i) {
    double plain = Noise(rank, i, 1), step = 0, sum = 0;
    for (int s : sources) {
      plain += Noise(s, i, 1);
      step += (DecodeF16(EncodeF16(Noise(s, i, 2))) - DecodeF16(EncodeF16(Noise(rank, i, 2)))) / (in_count + 1);
    }
    for (int q = 0; q < size; ++q) sum += DecodeF16(EncodeF16(Noise(q, i, 3)));
    EXPECT_NEAR(oa.get(i), plain / (in_count + 1), 1e-12);
    EXPECT_NEAR(ob.get(i), Noise(rank, i, 2) + step, 1e-12);
    EXPECT_EQ(oc.get(i), sum);
  }
}

// Many named CHOCO states alive at once, queued nonblocking, sizes on both sides of the
// inline-message threshold, one rank slower than the others: every result is the first
// CHOCO step, x + sum_j w_j (fp16(x_j) - fp16(x)), and stays so on a second round.
TEST_F(Compress, ManyNonblockingStatesWithASlowRank) {
  int in_count = 0;
  starling_in_neighbors(ctx, nullptr, 0, &in_count);  // sets the count, then fails on capacity
  std::vector<int> sources(static_cast<size_t>(in_count));
  ASSERT_OK(starling_in_neighbors(ctx, sources.data(), in_count, &in_count));
  const std::vector<int64_t> sizes = {1, 1000, 20000, 70000, 3, 16384, 16385, 100};
  const starling_compression_t c = Compression(STARLING_COMPRESS_FLOAT16);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::unique_ptr<Buffer>> xs, outs;
    std::vector<std::string> names;
    std::vector<starling_request_t> reqs(sizes.size());
    for (size_t t = 0; t < sizes.size(); ++t) {
      xs.push_back(std::make_unique<Buffer>(Kind::kF64, std::vector<int64_t>{sizes[t]}));
      outs.push_back(std::make_unique<Buffer>(Kind::kF64, std::vector<int64_t>{sizes[t]}));
      Fill(*xs.back(), rank, static_cast<int>(t));
      names.push_back("many." + std::to_string(t));
    }
    for (size_t t = 0; t < sizes.size(); ++t) {
      if (rank == 0 && t % 3 == 0) usleep(20000);  // rank 0 lags behind
      starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
      args.name = names[t].c_str();
      ASSERT_OK(starling_neighbor_allreduce_compressed_nonblocking(ctx, &xs[t]->t, &outs[t]->t, &args, &c, &reqs[t]));
    }
    for (auto& req : reqs) {
      EXPECT_OK(starling_request_wait(req));
      EXPECT_OK(starling_request_free(req));
    }
    for (size_t t = 0; t < sizes.size(); ++t) {
      for (size_t i = 0; i < static_cast<size_t>(sizes[t]); ++i) {
        const double mine = Noise(rank, i, static_cast<int>(t));
        double expected = mine;
        for (int j : sources)
          expected += (DecodeF16(EncodeF16(Noise(j, i, static_cast<int>(t)))) - DecodeF16(EncodeF16(mine))) /
                      (in_count + 1);
        ASSERT_NEAR(outs[t]->get(i), expected, 1e-12) << "tensor " << t << " element " << i;
      }
    }
    ASSERT_OK(starling_compression_reset(ctx, nullptr));  // the second round starts from zero copies again
  }
}

TEST_F(Compress, RanksCompressingDifferentlyGetMismatch) {
  if (size == 1) GTEST_SKIP() << "needs 2 ranks";
  Buffer in(Kind::kF32, {200}), out(Kind::kF32, {200});
  Fill(in, rank);
  // Different compressors; then different k; then plain against compressed.
  starling_compression_t c = Compression(rank == 0 ? STARLING_COMPRESS_TOPK : STARLING_COMPRESS_FLOAT16, rank == 0 ? 10 : 0);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, nullptr, &c), STARLING_ERR_MISMATCH,
               "compressed allreduce");
  c = Compression(STARLING_COMPRESS_TOPK, rank == 1 ? 11 : 10);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, nullptr, &c), STARLING_ERR_MISMATCH,
               "fingerprint");
  c = Compression(STARLING_COMPRESS_SIGN);
  if (rank == 0) {
    EXPECT_EQ(starling_allreduce(ctx, &in.t, &out.t, STARLING_SUM, nullptr), STARLING_ERR_MISMATCH);
  } else {
    EXPECT_EQ(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, nullptr, &c), STARLING_ERR_MISMATCH);
  }
  // The context still works afterwards.
  c = Compression(STARLING_COMPRESS_SIGN);
  EXPECT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, nullptr, &c));
  // random-k: a rank a step behind (its state was reset) would pick other indices.
  c = Compression(STARLING_COMPRESS_RANDOMK, 5);
  EXPECT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, "rk", &c));
  if (rank == 0) ASSERT_OK(starling_compression_reset(ctx, "rk"));
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, "rk", &c), STARLING_ERR_MISMATCH,
               "fingerprint");
  // Different names give different indices too.
  EXPECT_EQ(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, rank == 0 ? "rk.a" : "rk.b", &c),
            STARLING_ERR_MISMATCH);
  ASSERT_OK(starling_compression_reset(ctx, nullptr));
  EXPECT_OK(starling_allreduce_compressed(ctx, &in.t, &out.t, STARLING_SUM, "rk", &c));

  // CHOCO: rank 0 compresses with top-k, the others with float16. Ranks that receive
  // from rank 0, and rank 0 itself, fail; nobody gets garbage.
  int in_count = 0;
  starling_in_neighbors(ctx, nullptr, 0, &in_count);  // sets the count, then fails on capacity
  std::vector<int> sources(static_cast<size_t>(in_count));
  ASSERT_OK(starling_in_neighbors(ctx, sources.data(), in_count, &in_count));
  const bool hears_zero = std::find(sources.begin(), sources.end(), 0) != sources.end();
  c = Compression(rank == 0 ? STARLING_COMPRESS_TOPK : STARLING_COMPRESS_FLOAT16, rank == 0 ? 10 : 0);
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.name = "mismatch.choco";
  const starling_status_t s = starling_neighbor_allreduce_compressed(ctx, &in.t, &out.t, &args, &c);
  if (rank == 0 || hears_zero) {
    EXPECT_EQ(s, STARLING_ERR_MISMATCH) << starling_last_error();
    EXPECT_NE(std::string(starling_last_error()).find("top-k k=10"), std::string::npos) << starling_last_error();
  } else {
    EXPECT_EQ(s, STARLING_SUCCESS) << starling_last_error();
  }
  // Plain neighbor_allreduce on one rank against CHOCO on the others.
  c = Compression(STARLING_COMPRESS_FLOAT16);
  args.name = "mismatch.choco2";
  const starling_status_t s2 = rank == 0 ? starling_neighbor_allreduce(ctx, &in.t, &out.t, &args)
                                         : starling_neighbor_allreduce_compressed(ctx, &in.t, &out.t, &args, &c);
  if (rank == 0 || hears_zero) EXPECT_EQ(s2, STARLING_ERR_MISMATCH) << starling_last_error();
  EXPECT_OK(starling_barrier(ctx));
}

TEST_F(Compress, BadInputIsRejectedWithAClearMessage) {
  Buffer f(Kind::kF32, {10}), fo(Kind::kF32, {10}), i8(Kind::kI8, {10}), i32(Kind::kI32, {10});
  starling_compression_t c = Compression(STARLING_COMPRESS_TOPK, 3);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &i8.t, &i8.t, STARLING_SUM, nullptr, &c), STARLING_ERR_UNSUPPORTED,
               "top-k compression needs a floating-point tensor");
  c = Compression(STARLING_COMPRESS_SIGN);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &i32.t, &i32.t, STARLING_SUM, nullptr, &c), STARLING_ERR_UNSUPPORTED,
               "int32");
  c = Compression(STARLING_COMPRESS_TOPK, 11);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "k = 11 is out of range");
  c = Compression(STARLING_COMPRESS_RANDOMK, -1);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, "x", &c), STARLING_ERR_INVALID_ARGUMENT,
               "k must be >= 1");
  c = Compression(STARLING_COMPRESS_TOPK, 0, 0.0);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "ratio must be in (0, 1]");
  c = Compression(STARLING_COMPRESS_TOPK, 0, 1.5);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "ratio");
  c = Compression(STARLING_COMPRESS_TOPK, 2, 0.5);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "not both");
  c = Compression(42);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "compressor is 42");
  c = Compression(STARLING_COMPRESS_FLOAT16);
  c.gamma = 0.0;
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "gamma");
  c = Compression(STARLING_COMPRESS_FLOAT16);
  c.struct_size = 4;
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "STARLING_COMPRESSION_INIT");
  c = Compression(STARLING_COMPRESS_FLOAT16);
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_MAX, nullptr, &c), STARLING_ERR_UNSUPPORTED,
               "STARLING_SUM and STARLING_AVERAGE");
  c.error_feedback = 1;
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, nullptr, &c),
               STARLING_ERR_INVALID_ARGUMENT, "pass a name");
  c.error_feedback = 2;
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, "n", &c), STARLING_ERR_INVALID_ARGUMENT,
               "error_feedback must be 0 or 1");
  // State reused for a tensor of another shape, then reset.
  c = Compression(STARLING_COMPRESS_TOPK, 2);
  c.error_feedback = 1;
  ASSERT_OK(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_SUM, "state", &c));
  Buffer g(Kind::kF32, {2, 5}), go(Kind::kF32, {2, 5});
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &g.t, &go.t, STARLING_SUM, "state", &c),
               STARLING_ERR_INVALID_ARGUMENT, "was created for float32[10] but this call passes float32[2, 5]");
  Buffer h(Kind::kF64, {10}), ho(Kind::kF64, {10});
  EXPECT_ERROR(starling_allreduce_compressed(ctx, &h.t, &ho.t, STARLING_SUM, "state", &c),
               STARLING_ERR_INVALID_ARGUMENT, "float64[10]");
  ASSERT_OK(starling_compression_reset(ctx, "state"));
  EXPECT_OK(starling_allreduce_compressed(ctx, &g.t, &go.t, STARLING_SUM, "state", &c));
  // CHOCO: a name is required, dynamic mode is not supported.
  c = Compression(STARLING_COMPRESS_FLOAT16);
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  EXPECT_ERROR(starling_neighbor_allreduce_compressed(ctx, &f.t, &fo.t, &args, &c), STARLING_ERR_INVALID_ARGUMENT,
               "args->name");
  args.name = "dyn";
  args.dynamic = 1;
  args.use_weights = 1;
  EXPECT_ERROR(starling_neighbor_allreduce_compressed(ctx, &f.t, &fo.t, &args, &c), STARLING_ERR_UNSUPPORTED,
               "static mode");
  EXPECT_ERROR(starling_compression_reset(nullptr, nullptr), STARLING_ERR_INVALID_HANDLE, "");
  // NONE is the plain operation; a NULL compression too.
  c = Compression(STARLING_COMPRESS_NONE);
  Fill(f, rank);
  EXPECT_OK(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_MAX, nullptr, &c));
  EXPECT_OK(starling_allreduce_compressed(ctx, &f.t, &fo.t, STARLING_MIN, nullptr, nullptr));
  EXPECT_OK(starling_compression_reset(ctx, nullptr));
}

}  // namespace
