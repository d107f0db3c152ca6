// impl/ops/wire: what peers send is parsed by pure functions that reject truncated,
// corrupted and overflowing messages with a description instead of trusting them.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "impl/common/error.h"
#include "impl/ops/wire.h"

namespace starling::ops {
namespace {

// A frame message as Exchange sends it: the header, then its inline payload.
std::vector<char> Message(const Header& h, size_t payload = 0) {
  std::vector<char> m(sizeof(Header) + payload, 0);
  std::memcpy(m.data(), &h, sizeof h);
  return m;
}

std::string Validate(const std::vector<char>& m, size_t length) {
  Header h;
  return ValidateFrameHeader(m.data(), length, &h);
}

bool Has(const std::string& text, const char* fragment) { return text.find(fragment) != std::string::npos; }

TEST(Wire, AcceptsWellFormedFrames) {
  Header h;
  h.flags = kFlagPayloadInline;
  h.payload_bytes = 24;
  std::vector<char> m = Message(h, 24);
  Header parsed;
  EXPECT_EQ(ValidateFrameHeader(m.data(), m.size(), &parsed), "");
  EXPECT_EQ(parsed.payload_bytes, 24u);
  h.flags = kFlagPoisoned;  // the payload follows in chunks
  h.payload_bytes = uint64_t{1} << 30;
  h.chunk = 1 << 20;
  EXPECT_EQ(Validate(Message(h), sizeof(Header)), "");
}

TEST(Wire, RejectsTruncatedAndCorruptedHeaders) {
  Header h;
  h.flags = kFlagPayloadInline;
  std::vector<char> m = Message(h);
  EXPECT_EQ(Validate(m, 0), "a 0-byte message where a header was expected");
  EXPECT_TRUE(Has(Validate(m, sizeof(Header) - 1), "-byte message where a header was expected"));
  h.magic = 0x12345678;
  EXPECT_EQ(Validate(Message(h), sizeof(Header)), "a message that is not a Starling header");
  h.magic = kHeaderMagic;
  h.flags = 1u << 7;
  EXPECT_TRUE(Has(Validate(Message(h), sizeof(Header)), "unknown flags 0x80"));
}

TEST(Wire, RejectsPayloadSizesThatDisagreeOrOverflow) {
  Header h;
  h.flags = kFlagPayloadInline;
  h.payload_bytes = 16;  // claims 16 inline bytes, carries 8
  EXPECT_TRUE(Has(Validate(Message(h, 8), sizeof(Header) + 8), "16 inline payload bytes in a"));
  h.payload_bytes = UINT64_MAX;
  EXPECT_TRUE(Has(Validate(Message(h, 8), sizeof(Header) + 8), "malformed header"));
  h.flags = 0;
  h.payload_bytes = 100;
  h.chunk = 0;  // a stream in chunks of 0 bytes never ends
  EXPECT_TRUE(Has(Validate(Message(h), sizeof(Header)), "in chunks of 0"));
  h.chunk = (1u << 30) + 1;  // beyond the MPI count limit
  EXPECT_TRUE(Has(Validate(Message(h), sizeof(Header)), "malformed header"));
  h.chunk = 4096;
  h.payload_bytes = kMaxFramePayload + 1;
  EXPECT_TRUE(Has(Validate(Message(h), sizeof(Header)), "malformed header (payload of 1099511627777 bytes"));
  h.payload_bytes = 100;
  EXPECT_TRUE(Has(Validate(Message(h, 4), sizeof(Header) + 4), "4 unexpected bytes"));
}

// A neighbor frame's trailer is part of the frame: every receiver takes it, so its
// size is checked with the header.
TEST(Wire, NeighborFrameTrailers) {
  Header h;
  h.chunk = 1;
  h.sig.kind = OpKind::kNeighborFrame;
  h.aux = 4096;
  EXPECT_EQ(Validate(Message(h), sizeof(Header)), "");
  EXPECT_EQ(FrameTrailerBytes(h), 4096u);
  h.aux = kMaxFramePayload + 1;
  EXPECT_TRUE(Has(Validate(Message(h), sizeof(Header)), "a trailer of 1099511627777 bytes"));
  h.sig.kind = OpKind::kBroadcast;  // aux is the op's own field elsewhere
  EXPECT_EQ(FrameTrailerBytes(h), 0u);
  EXPECT_EQ(Validate(Message(h), sizeof(Header)), "");
}

Header NeighborHeader(int64_t count, uint64_t payload_bytes, uint64_t aux = 0) {
  Header h;
  h.sig.kind = OpKind::kNeighborFrame;
  h.sig.count = count;
  h.sig.chunk = 1 << 20;
  h.payload_bytes = payload_bytes;
  h.aux = aux;
  return h;
}

TEST(Wire, ParsesNeighborTables) {
  std::vector<char> payload(2 * sizeof(SegmentInfo) + 12);
  SegmentInfo a, b;
  a.seq = 7;
  a.bytes = 4;
  b.seq = 8;
  b.bytes = 8;
  std::memcpy(payload.data(), &a, sizeof a);
  std::memcpy(payload.data() + sizeof a, &b, sizeof b);
  NeighborTable table;
  EXPECT_EQ(ParseNeighborTable(NeighborHeader(2, payload.size()), payload.data(), &table), "");
  ASSERT_EQ(table.entries.size(), 2u);
  EXPECT_EQ(table.entries[1].seq, 8u);
  EXPECT_TRUE(table.packed);
  EXPECT_EQ(table.table_bytes, 2 * sizeof(SegmentInfo));
  // The same data as one follow-up message.
  EXPECT_EQ(ParseNeighborTable(NeighborHeader(2, 2 * sizeof(SegmentInfo), 12), payload.data(), &table), "");
  EXPECT_FALSE(table.packed);
}

TEST(Wire, RejectsMalformedNeighborTables) {
  std::vector<char> payload(2 * sizeof(SegmentInfo));
  SegmentInfo huge;
  huge.bytes = UINT64_MAX;
  std::memcpy(payload.data(), &huge, sizeof huge);
  std::memcpy(payload.data() + sizeof huge, &huge, sizeof huge);
  NeighborTable table;
  Header other = NeighborHeader(1, 0);
  other.sig.kind = OpKind::kAllreduce;
  EXPECT_TRUE(Has(ParseNeighborTable(other, payload.data(), &table), "where this rank expected neighbor data"));
  // 2^60 entries of 48 bytes wrap to 0 bytes of table.
  EXPECT_TRUE(Has(ParseNeighborTable(NeighborHeader(int64_t{1} << 60, 0), payload.data(), &table),
                  "1152921504606846976 table entries in 0 bytes"));
  EXPECT_TRUE(Has(ParseNeighborTable(NeighborHeader(-1, 0), payload.data(), &table), "-1 table entries"));
  EXPECT_TRUE(Has(ParseNeighborTable(NeighborHeader(2, payload.size()), payload.data(), &table),
                  "segment sizes overflow"));
  EXPECT_TRUE(Has(ParseNeighborTable(NeighborHeader(1, sizeof(SegmentInfo)), payload.data(), &table),
                  "where 0 bytes of data follow"));
  EXPECT_TRUE(Has(ParseNeighborTable(NeighborHeader(1, sizeof(SegmentInfo), 5), payload.data(), &table),
                  "where 5 bytes of data follow"));
  SegmentInfo small;
  small.bytes = 5;
  std::memcpy(payload.data(), &small, sizeof small);
  Header zero_chunk = NeighborHeader(1, sizeof(SegmentInfo), 5);
  zero_chunk.sig.chunk = 0;
  EXPECT_TRUE(Has(ParseNeighborTable(zero_chunk, payload.data(), &table), "in chunks of 0"));
  EXPECT_TRUE(table.entries.empty());  // nothing was taken from a bad frame
}

std::vector<char> GatherPayload(const std::vector<GatherMeta>& metas, size_t data_bytes) {
  std::vector<char> p(metas.size() * sizeof(GatherMeta) + data_bytes, 'x');
  std::memcpy(p.data(), metas.data(), metas.size() * sizeof(GatherMeta));
  return p;
}

TEST(Wire, UnpacksGatherBlocks) {
  const std::vector<char> p = GatherPayload({{3, 1, 2, 9}, {2, 0, 5, 9}}, 2 * 12);
  std::vector<GatherBlock> blocks;
  EXPECT_EQ(UnpackGatherBlocks(p.data(), p.size(), 2, 12, &blocks), "");
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].meta.rank, 3);
  EXPECT_EQ(blocks[0].data, p.data() + 2 * sizeof(GatherMeta));
  EXPECT_EQ(blocks[1].meta.first_dim, 5);
}

TEST(Wire, RejectsMalformedGatherBlocks) {
  std::vector<GatherBlock> blocks;
  const std::vector<char> one = GatherPayload({{1, 1, 2, 4}}, 24);
  EXPECT_TRUE(Has(UnpackGatherBlocks(one.data(), sizeof(GatherMeta), 2, 12, &blocks), "truncated metadata (2 entries"));
  EXPECT_TRUE(Has(UnpackGatherBlocks(one.data(), one.size() - 1, 1, 12, &blocks), "truncated data"));
  EXPECT_TRUE(Has(UnpackGatherBlocks(one.data(), one.size(), 1, 8, &blocks), "8 bytes left over"));
  // first_dim * row_bytes wraps around to 0: the old cursor arithmetic let this through.
  const std::vector<char> wraps = GatherPayload({{1, 1, int64_t{1} << 62, 4}}, 0);
  EXPECT_TRUE(Has(UnpackGatherBlocks(wraps.data(), wraps.size(), 1, 8, &blocks), "truncated data"));
  const std::vector<char> negative = GatherPayload({{1, 0, -3, 4}}, 0);
  EXPECT_TRUE(Has(UnpackGatherBlocks(negative.data(), negative.size(), 1, 8, &blocks), "first dimension -3"));
  const std::vector<char> flag = GatherPayload({{1, 2, 0, 4}}, 0);
  EXPECT_TRUE(Has(UnpackGatherBlocks(flag.data(), flag.size(), 1, 8, &blocks), "has_data 2"));
  EXPECT_TRUE(Has(UnpackGatherBlocks(flag.data(), flag.size(), -1, 8, &blocks), "-1 entries"));
  EXPECT_TRUE(blocks.empty());
}

TEST(Wire, AgreementAdoptsPoisonFromAnyHeader) {
  Signature mine;
  mine.kind = OpKind::kAllreduce;
  mine.seq = 4;
  Agreement agreement(0, mine);
  Header h;
  h.sender = 1;
  h.sig = mine;
  EXPECT_TRUE(agreement.Check(h));
  h.flags = kFlagPoisoned;  // culprits and signatures out of range: described, not trusted
  h.culprit_a = -7;
  h.culprit_b = 1 << 30;
  h.culprit_sig_a.kind = static_cast<OpKind>(250);
  h.culprit_sig_a.dtype = 200;
  h.culprit_sig_b.reduce = 99;
  EXPECT_FALSE(agreement.Check(h));
  try {
    agreement.ThrowIfPoisoned();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kMismatch);
    EXPECT_TRUE(Has(e.what(), "rank -7 called unknown #0")) << e.what();
  }
}

}  // namespace
}  // namespace starling::ops
