// What travels in front of every payload: a fixed header carrying the sender's view
// of the operation (its signature). Receivers compare signatures, so ranks that
// disagree on a collective (op, dtype, element count, root, sequence number) get a
// clear error instead of corrupted data or a hang. A rank that detects a disagreement
// marks its later headers "poisoned" with the two disagreeing ranks and their
// signatures, so the news reaches every rank that depends on it.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace starling::ops
