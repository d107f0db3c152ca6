// Micro-benchmark of the reduction kernels on 64 MiB tensors (the size of the
// collective benchmarks). Prints effective memory throughput: bytes read plus bytes
// written per call, divided by the best time of several runs. memcpy of the same
// buffer is printed as a yardstick for this machine's bandwidth.
//
// Build: g++ -std=c++17 -O3 -I. -Icapi/include impl/common/dtype.cc impl/ops/*.cc
//          examples/benchmarks/reduce_bench.cc -o reduce_bench

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "impl/common/half.h"
#include "impl/ops/convert.h"
#include "impl/ops/reduce.h"

namespace {

using starling::DType;
namespace ops = starling::ops;

constexpr size_t kBytes = size_t{64} << 20;
constexpr int kRuns = 10;

// Best wall time of kRuns calls after one warm-up call, in seconds.
double BestTime(const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < kRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

void Report(const char* name, double bytes_moved, double seconds) {
  std::printf("%-44s %8.2f ms %8.2f GB/s\n", name, seconds * 1e3, bytes_moved / seconds / 1e9);
}

// Buffers of 64 MiB each with small, finite values.
std::vector<unsigned char> MakeBuffer(DType dtype, float seed) {
  std::vector<unsigned char> b(kBytes);
  const size_t n = kBytes / starling::DTypeSize(dtype);
  for (size_t i = 0; i < n; ++i) {
    const float v = seed + static_cast<float>(i % 1000) * 0.01f;
    if (dtype == DType::kFloat32) {
      std::memcpy(b.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = starling::FloatToHalf(v);
      std::memcpy(b.data() + i * 2, &h, 2);
    }
  }
  return b;
}

void BenchDType(DType dtype) {
  const size_t n = kBytes / starling::DTypeSize(dtype);
  auto x = MakeBuffer(dtype, 1.0f), a = MakeBuffer(dtype, 2.0f), b = MakeBuffer(dtype, 3.0f);
  std::vector<unsigned char> out(kBytes);
  const void* in[] = {a.data(), b.data()};
  const double w[] = {0.25, 0.25};
  const char* name = starling::DTypeName(dtype);
  char label[64];

  std::snprintf(label, sizeof label, "%s WeightedSum k=2", name);
  Report(label, 4.0 * kBytes,
         BestTime([&] { ops::WeightedSum(out.data(), x.data(), 0.5, in, w, 2, n, dtype); }));
  std::snprintf(label, sizeof label, "%s WeightedSum k=2 (out == x)", name);
  Report(label, 4.0 * kBytes,
         BestTime([&] { ops::WeightedSum(x.data(), x.data(), 1.0, in, w, 2, n, dtype); }));
  std::snprintf(label, sizeof label, "%s UniformAverage k=2", name);
  Report(label, 4.0 * kBytes,
         BestTime([&] { ops::UniformAverage(out.data(), x.data(), in, 2, n, dtype); }));
  std::snprintf(label, sizeof label, "%s Reduce sum (dst += src)", name);
  Report(label, 3.0 * kBytes,
         BestTime([&] { ops::Reduce(out.data(), a.data(), n, dtype, starling::ReduceOp::kSum); }));
  std::snprintf(label, sizeof label, "%s Divide", name);
  Report(label, 2.0 * kBytes, BestTime([&] { ops::Divide(out.data(), n, dtype, 3.0); }));
}

// WeightedSum k=2 with the AVX2 kernels switched off: SSE2 and, for float16, the
// portable conversions (what a CPU without F16C/AVX2 runs).
void BenchBaseline() {
  ops::detail::SetAvx2Enabled(false);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const size_t n = kBytes / starling::DTypeSize(dtype);
    auto x = MakeBuffer(dtype, 1.0f), a = MakeBuffer(dtype, 2.0f), b = MakeBuffer(dtype, 3.0f);
    std::vector<unsigned char> out(kBytes);
    const void* in[] = {a.data(), b.data()};
    const double w[] = {0.25, 0.25};
    char label[64];
    std::snprintf(label, sizeof label, "%s WeightedSum k=2 (baseline kernels)",
                  starling::DTypeName(dtype));
    Report(label, 4.0 * kBytes,
           BestTime([&] { ops::WeightedSum(out.data(), x.data(), 0.5, in, w, 2, n, dtype); }));
  }
  ops::detail::SetAvx2Enabled(true);
}

void BenchConversions() {
  const size_t n = kBytes / 4;  // 64 MiB of float32 <-> 32 MiB of float16
  std::vector<float> f(n, 1.5f);
  std::vector<uint16_t> h(n, 0x3e00);
  const double moved = 6.0 * n;
  Report("half->float portable", moved,
         BestTime([&] { ops::detail::HalfToFloatPortable(h.data(), f.data(), n); }));
  Report("float->half portable", moved,
         BestTime([&] { ops::detail::FloatToHalfPortable(f.data(), h.data(), n); }));
  if (ops::detail::HasF16C()) {
    Report("half->float F16C", moved,
           BestTime([&] { ops::detail::HalfToFloatF16C(h.data(), f.data(), n); }));
    Report("float->half F16C", moved,
           BestTime([&] { ops::detail::FloatToHalfF16C(f.data(), h.data(), n); }));
  }
  // L1-resident blocks, as the kernels use them: conversion cost without memory.
  constexpr size_t kBlock = 2048;
  const int reps = static_cast<int>(n / kBlock);
  auto per_elem_ns = [&](const std::function<void()>& fn) {
    return BestTime([&] {
             for (int r = 0; r < reps; ++r) fn();
           }) /
           (reps * kBlock) * 1e9;
  };
  std::printf("in-cache 2048-element blocks: half->float portable %.3f ns/elem",
              per_elem_ns([&] { ops::detail::HalfToFloatPortable(h.data(), f.data(), kBlock); }));
  std::printf(", float->half portable %.3f ns/elem",
              per_elem_ns([&] { ops::detail::FloatToHalfPortable(f.data(), h.data(), kBlock); }));
  if (ops::detail::HasF16C()) {
    std::printf(", half->float F16C %.3f ns/elem",
                per_elem_ns([&] { ops::detail::HalfToFloatF16C(h.data(), f.data(), kBlock); }));
    std::printf(", float->half F16C %.3f ns/elem",
                per_elem_ns([&] { ops::detail::FloatToHalfF16C(f.data(), h.data(), kBlock); }));
  }
  std::printf("\n");
}

}  // namespace

int main() {
  std::vector<unsigned char> src(kBytes, 1), dst(kBytes);
  Report("memcpy 64 MiB (yardstick)", 2.0 * kBytes,
         BestTime([&] { std::memcpy(dst.data(), src.data(), kBytes); }));
  BenchDType(DType::kFloat32);
  BenchDType(DType::kFloat16);
  BenchDType(DType::kBFloat16);
  BenchBaseline();
  BenchConversions();
  return 0;
}
