// What travels in front of every payload: a fixed header carrying the sender's view
// of the operation (its signature). Receivers compare signatures, so ranks that
// disagree on a collective (op, dtype, element count, root, sequence number) get a
// clear error instead of corrupted data or a hang. A rank that detects a disagreement
// marks its later headers "poisoned" with the two disagreeing ranks and their
// signatures, so the news reaches every rank that depends on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "impl/common/dtype.h"

namespace starling::ops {

enum class OpKind : uint8_t {
  kNone = 0,
  kAllreduce,
  kBroadcast,
  kAllgather,
  kAllgatherDims,
  kBarrier,
  kNeighborAllreduce,
  kNeighborAllgather,
  kHierarchicalNeighborAllreduce,
  kPairGossip,
  kSetTopology,
  kWindowCreate,
  kWindowFree,
  kLocalAllreduce,
  kGpuSetup,              // a context choosing its GPU path (impl/device/gpu_path.cc)
  kNcclAllreduce,         // the NCCL path's operations agree on these kinds, so a rank
  kNcclBroadcast,         // on the NCCL path never meets a rank on the MPI path unnoticed
  kNcclAllgather,
  kNcclNeighborAllreduce,
  kCompressedAllreduce,   // impl/compress: extra = compressor, root = its fingerprint
  kChocoNeighborAllreduce,
  kReduceScatter,         // root = a hash of the block counts
  kAlltoall,              // extra = 1 with per-rank counts
  kContextSplit,
  kNeighborFrame,         // marks a neighbor frame (neighbor_exchange.h): seq, dtype and
                          // extra (the OpKind) of its first segment, count = its segments
  kProbePeers,            // count = the throughput pings' bytes, root = repetitions
  kNcclReduceScatter,     // as kReduceScatter, on the NCCL path
  kNcclAlltoall,          // as kAlltoall, on the NCCL path
  kNcclNeighborAllgather, // count = row bytes, root = trailing shape hash (NCCL path)
  kContextGrow,           // count = the processes to start
  kContextShrink,         // count = the ranks that leave
};
const char* OpKindName(OpKind kind);

// What every participant of one operation must agree on. Fields an op does not use
// stay 0.
struct Signature {
  uint64_t seq = 0;      // collective sequence number on the context
  int64_t count = 0;     // elements (or, for allgather, bytes per row)
  int32_t root = 0;      // broadcast root / op-specific
  uint32_t chunk = 0;    // chunk size of raw streams, bytes
  OpKind kind = OpKind::kNone;
  uint8_t dtype = 0;
  uint8_t reduce = 0;
  uint8_t extra = 0;     // op-specific flag

  bool operator==(const Signature& other) const;
  bool operator!=(const Signature& other) const { return !(*this == other); }
};
// "allreduce #12 (sum, float32, 1024 elements)"
std::string DescribeSignature(const Signature& sig);

constexpr uint32_t kHeaderMagic = 0x53544c31;  // "STL1"
constexpr uint32_t kFlagPoisoned = 1u << 0;
constexpr uint32_t kFlagPayloadInline = 1u << 1;

// Largest payload that travels inside its header's message; receives of frames are
// posted with room for it. STARLING_INLINE_BYTES is clamped to this.
constexpr size_t kMaxInlineBytes = 64 << 10;
// Largest single message (MPI counts are ints). Streams that gain nothing from
// pipelining travel as one message up to this size.
constexpr size_t kMaxMessageBytes = size_t{1} << 30;
inline size_t WholeMessageChunk(size_t bytes) {
  return bytes == 0 ? 1 : (bytes < kMaxMessageBytes ? bytes : kMaxMessageBytes);
}
// Largest payload a header may announce.
constexpr uint64_t kMaxFramePayload = uint64_t{1} << 40;

// Everything a frame's sender puts on the wire is announced by its header, so a
// receiver that expected another operation still takes all of it and leaves nothing
// behind for the next operation: the header, its payload (inline or in chunks of
// `chunk`), then, for a neighbor frame with aux > 0, a trailer of aux bytes in
// messages of WholeMessageChunk(aux) bytes (FrameTrailerBytes).
struct Header {
  uint32_t magic = kHeaderMagic;
  uint32_t flags = 0;
  int32_t sender = -1;
  int32_t culprit_a = -1;  // when poisoned: the two ranks found to disagree
  int32_t culprit_b = -1;
  uint32_t chunk = 0;      // chunk size of the payload's follow-up messages
  uint64_t payload_bytes = 0;
  uint64_t aux = 0;        // op-specific (e.g. a first dimension)
  Signature sig;
  Signature culprit_sig_a;
  Signature culprit_sig_b;
};

// Checks a received frame message (`length` bytes: a Header, then its payload when
// flagged inline) and copies the header into *header. Returns "" if it is well formed,
// else what is wrong ("a 12-byte message where a header was expected"). Pure, so the
// fuzzer (tests/fuzz) drives it directly.
std::string ValidateFrameHeader(const void* message, size_t length, Header* header);
// Bytes that follow a (validated) frame after its payload: a neighbor frame's data sent
// apart from its table.
uint64_t FrameTrailerBytes(const Header& header);

// Throws Error(kMismatch): rank_a called `a` while rank_b called `b`.
[[noreturn]] void ThrowDisagreement(int rank_a, const Signature& a, int rank_b, const Signature& b);

// Tracks whether this rank has seen (directly or through poisoned headers) a
// disagreement in the current operation.
class Agreement {
 public:
  Agreement(int rank, const Signature& mine) : rank_(rank), mine_(mine) {}
  const Signature& mine() const { return mine_; }
  // Fills sender, signature and poison fields of an outgoing header.
  void Stamp(Header* header) const;
  // Compares an incoming header with our signature and adopts its poison. Returns
  // true if the header agrees and is not poisoned (its payload can be used).
  bool Check(const Header& header);
  bool ok() const { return !poisoned_; }
  // Throws Error(kMismatch) describing the disagreement, if any.
  void ThrowIfPoisoned() const;

 private:
  int rank_;
  Signature mine_;
  bool poisoned_ = false;
  int culprit_a_ = -1, culprit_b_ = -1;
  Signature sig_a_, sig_b_;
};

// One entry of a neighbor frame's table (see neighbor_exchange.h).
struct SegmentInfo {
  uint64_t seq = 0;         // the operation's sequence number
  int64_t count = 0;        // elements (allreduce) or bytes per row (allgather)
  int64_t first_dim = 0;    // allgather: rows
  uint64_t bytes = 0;       // data bytes of this segment
  double weight = 1.0;      // the sender's destination weight
  uint32_t shape_hash = 0;  // allgather: trailing dimensions
  OpKind kind = OpKind::kNone;
  uint8_t dtype = 0;
  uint8_t reserved[2] = {};  // op-specific (CHOCO: its codec)
  // 1: the data is not in the frame but in the sender's shared-memory outbox
  // (transport/shm/outbox.h), in publication `shm_publication` at `shm_offset`.
  // 2: the receiver reads it from the sender's memory, offer `shm_publication`
  // (transport/shm/offers.h), at address `shm_offset` there.
  uint8_t in_shm = 0;
  uint8_t padding[3] = {};
  uint32_t shm_publication = 0;
  uint64_t shm_offset = 0;
};

// A neighbor frame (header.sig.kind == kNeighborFrame): header.sig.count table entries
// at the start of its payload, then the data of those not in shared memory, packed in
// the payload (header.aux == 0) or following as the frame's trailer of header.aux bytes.
struct NeighborTable {
  std::vector<SegmentInfo> entries;
  bool packed = true;
  size_t table_bytes = 0;  // where packed data starts in the payload
};
// Reads the table of a frame whose payload (header.payload_bytes bytes) is `payload`.
// Returns "" or what is wrong ("sent ... where this rank expected neighbor data").
std::string ParseNeighborTable(const Header& header, const char* payload, NeighborTable* table);

// allgather's metadata per rank, gathered by dissemination (fixed layout on the wire).
struct GatherMeta {
  int32_t rank;
  int32_t has_data;  // 1: the block's rows travel with the metadata
  int64_t first_dim;
  int64_t out_first_dim;
};
struct GatherBlock {
  GatherMeta meta;
  const char* data;  // meta.first_dim * row_bytes bytes, when meta.has_data
};
// Appends the `count` blocks packed in `payload` (`bytes` long: their metadata, then the
// rows of those with has_data). Returns "" or what is wrong; on error nothing is appended.
std::string UnpackGatherBlocks(const char* payload, uint64_t bytes, int count, uint64_t row_bytes,
                               std::vector<GatherBlock>* blocks);

}  // namespace starling::ops
