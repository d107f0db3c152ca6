// The outbox writer's copy (publish_copy.h): both ways copy every byte exactly, and
// the automatic choice follows the timings it makes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "impl/transport/shm/publish_copy.h"

namespace starling::transport::shm {
namespace {

std::vector<char> Pattern(size_t bytes, int seed) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed)) & 0xff);
  return v;
}

TEST(PublishCopy, StreamCopyCopiesEveryByteAtAnyAlignmentAndSize) {
  // Destination offsets across the 16-byte store boundary, sizes around the 64-byte
  // blocks, and nothing written past the end.
  for (size_t offset : {0, 1, 7, 15, 16, 33}) {
    for (size_t bytes : {0, 1, 15, 16, 63, 64, 65, 127, 4096, 65536 + 3}) {
      const std::vector<char> src = Pattern(bytes + 3, 1);
      std::vector<char> dst(bytes + offset + 64, 'z');
      StreamCopy(dst.data() + offset, src.data() + 3, bytes);
      ASSERT_EQ(0, std::memcmp(dst.data() + offset, src.data() + 3, bytes)) << offset << " " << bytes;
      for (size_t i = 0; i < offset; ++i) ASSERT_EQ(dst[i], 'z');
      for (size_t i = offset + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 'z') << offset << " " << bytes;
    }
  }
}

TEST(PublishCopy, CopiesEveryPieceInEachMode) {
  for (CopyMode mode : {CopyMode::kAuto, CopyMode::kPlain, CopyMode::kStream}) {
    PublishCopy copy(mode);
    const std::vector<char> a = Pattern(70000, 2), b = Pattern(33, 3);
    std::vector<char> out(70000 + 64 + 33, 0);
    char* dst[] = {out.data(), out.data() + 70000 + 64};
    const void* src[] = {a.data(), b.data()};
    const size_t bytes[] = {a.size(), b.size()};
    auto piece = [&](size_t i) { return std::make_tuple(dst[i], src[i], bytes[i]); };
    for (int round = 0; round < 5; ++round) {  // the first rounds time both ways (auto)
      std::memset(out.data(), 0, out.size());
      copy.Copy(a.size() + b.size(), 2, piece);
      ASSERT_EQ(0, std::memcmp(out.data(), a.data(), a.size()));
      ASSERT_EQ(0, std::memcmp(out.data() + 70000 + 64, b.data(), b.size()));
    }
  }
}

TEST(PublishCopy, FixedModesAndSmallPublications) {
  EXPECT_TRUE(PublishCopy(CopyMode::kStream).WouldStream(4096));
  EXPECT_FALSE(PublishCopy(CopyMode::kPlain).WouldStream(1 << 20));
  PublishCopy automatic;
  EXPECT_FALSE(automatic.WouldStream(PublishCopy::kMinBytes - 1));
  EXPECT_FALSE(automatic.WouldStream(1 << 20));  // the first publication of a class is timed plain
}

TEST(PublishCopy, AutomaticTimesBothWaysEveryRound) {
  // Real copies of 1 MiB: the first publication is plain, the second streamed; from
  // then on the choice follows the timings (which way wins depends on the machine),
  // and kRemeasureEvery publications later both are timed again.
  PublishCopy copy;
  const size_t size = 1 << 20;
  const std::vector<char> src = Pattern(size, 4);
  std::vector<char> out(size);
  auto piece = [&](size_t) { return std::make_tuple(out.data(), static_cast<const void*>(src.data()), size); };
  EXPECT_FALSE(copy.WouldStream(size));
  copy.Copy(size, 1, piece);
  EXPECT_TRUE(copy.WouldStream(size));
  copy.Copy(size, 1, piece);
  for (uint32_t i = 2; i < PublishCopy::kRemeasureEvery; ++i) copy.Copy(size, 1, piece);
  EXPECT_FALSE(copy.WouldStream(size));  // the plain copy is measured again
  copy.Copy(size, 1, piece);
  EXPECT_TRUE(copy.WouldStream(size));  // then the streamed one
  // Another size class keeps its own count: its first publication is timed plain.
  EXPECT_FALSE(copy.WouldStream(size * 4));
  EXPECT_EQ(0, std::memcmp(out.data(), src.data(), size));
}

}  // namespace
}  // namespace starling::transport::shm
