#include "impl/transport/shm/publish_copy.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace starling::transport::shm {

void StreamCopy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Plain stores up to the destination's first 16-byte boundary, streamed 64 bytes at a
  // time from there, plain stores for the tail.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t bulk = bytes / 64 * 64;
  for (size_t i = 0; i < bulk; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + bulk, s + bulk, bytes - bulk);
  _mm_sfence();  // non-temporal stores are weakly ordered
#else
  std::memcpy(dst, src, bytes);
#endif
}

size_t PublishCopy::ClassOf(size_t total) {
  size_t c = 0;
  while (c + 1 < 48 && (size_t{2} << c) <= total) ++c;
  return c;
}

bool PublishCopy::Choose(const Class& c) {
  // Each way is timed at the first publications of the class and again every
  // kRemeasureEvery (the mode changes over minutes; a measurement in the wrong way
  // costs at most one slow copy in kRemeasureEvery).
  const uint32_t phase = c.count % kRemeasureEvery;
  if (phase == 0 || c.plain == 0) return false;
  if (phase == 1 || c.stream == 0) return true;
  return c.plain > kStreamWhenSlower * c.stream;
}

bool PublishCopy::Streams(size_t total, size_t k) const {
  if (mode_ != CopyMode::kAuto) return mode_ == CopyMode::kStream && total > 0;
  return total >= kMinBytes && Choose(classes_[k]);
}

void PublishCopy::Record(size_t k, size_t total, bool stream, double seconds) {
  Class& c = classes_[k];
  const double per_byte = std::max(seconds / static_cast<double>(total), 1e-15);
  // A measurement round sets the time; the way in use follows it smoothly, so that one
  // copy slowed by a preemption does not switch ways (a mode change does, in a few).
  double& time = stream ? c.stream : c.plain;
  const bool measuring = c.count % kRemeasureEvery <= 1 || time == 0;
  time = measuring ? per_byte : 0.75 * time + 0.25 * per_byte;
  ++c.count;
}

}  // namespace starling::transport::shm
