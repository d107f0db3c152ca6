// How a writer copies a publication into its outbox. A plain copy first takes each
// cache line back from the reader's core, which read it two publications ago (a read
// for ownership). Where the host runs the two cores decides what that costs: on the
// project's VM 7.5 or 28 us per 64 KiB, 24 or 415 us per MiB, a mode that holds for
// minutes (docs/performance.md, "the slow mode"). Non-temporal stores skip that read
// (2 and 38 us) but leave the data in memory for the reader, whose combine then takes
// about as long again as the streamed copy (measured 0.2-1.5x from 64 KiB to 4 MiB), so
// they win once the plain copy costs about twice theirs, and lose where it is cheap (a
// 1 MiB exchange 2x slower). So the writer times both: non-temporal stores when the
// plain copy costs over 3x theirs, per size class, both measured again every 256
// publications of the class and the way in use at each.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace starling::transport::shm {

// Copies `bytes` from `src` to `dst` (not overlapping) with non-temporal stores for the
// bulk where the CPU has them (x86: SSE2; elsewhere memcpy), then orders them before
// any later store (the release that publishes them).
void StreamCopy(void* dst, const void* src, size_t bytes);

enum class CopyMode { kAuto, kPlain, kStream };

class PublishCopy {
 public:
  // Plain over streamed seconds per byte on the VM: 0.6-1.1 in the fast mode from 256
  // KiB (up to 3.7 at 64 KiB, where streaming costs the reader least), 3.5-13 in the
  // slow one (a milder slow mode of 3.5-5 at 1-4 MiB: streamed exchanges 1.7-1.9x faster).
  static constexpr double kStreamWhenSlower = 3.0;
  static constexpr uint32_t kRemeasureEvery = 256;  // publications per size class
  static constexpr size_t kMinBytes = 16 << 10;     // below: always plain (too short to time)

  explicit PublishCopy(CopyMode mode = CopyMode::kAuto) : mode_(mode) {}
  // Copies one publication of `total` bytes in `count` pieces: piece(i) returns
  // {destination, source, bytes}.
  template <typename Piece>
  void Copy(size_t total, size_t count, Piece piece) {
    const size_t k = ClassOf(total);
    const bool stream = Streams(total, k);
    const bool timed = mode_ == CopyMode::kAuto && total >= kMinBytes;
    const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    for (size_t i = 0; i < count; ++i) {
      const auto [dst, src, bytes] = piece(i);
      if (bytes == 0) continue;
      if (stream)
        StreamCopy(dst, src, bytes);
      else
        std::memcpy(dst, src, bytes);
    }
    if (timed) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      Record(k, total, stream, seconds);
    }
  }
  // What the next publication of `total` bytes uses.
  bool WouldStream(size_t total) const { return Streams(total, ClassOf(total)); }

 private:
  bool Streams(size_t total, size_t k) const;  // k: ClassOf(total)
  void Record(size_t k, size_t total, bool stream, double seconds);
  struct Class {
    double plain = 0;   // seconds per byte, last measured; 0: not yet
    double stream = 0;
    uint32_t count = 0;
  };
  static bool Choose(const Class& c);
  static size_t ClassOf(size_t total);
  CopyMode mode_;
  std::array<Class, 48> classes_{};  // by log2 of the size
};

}  // namespace starling::transport::shm
