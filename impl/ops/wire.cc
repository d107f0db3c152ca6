#include "impl/ops/wire.h"

#include <cstring>

#include "impl/common/checked.h"
#include "impl/common/error.h"

namespace starling::ops {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kNone: return "none";
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kAllgatherDims: return "allgather_first_dims";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kNeighborAllreduce: return "neighbor_allreduce";
    case OpKind::kNeighborAllgather: return "neighbor_allgather";
    case OpKind::kHierarchicalNeighborAllreduce: return "hierarchical_neighbor_allreduce";
    case OpKind::kPairGossip: return "pair_gossip";
    case OpKind::kSetTopology: return "set_topology";
    case OpKind::kWindowCreate: return "window_create";
    case OpKind::kWindowFree: return "window_free";
    case OpKind::kLocalAllreduce: return "local_allreduce";
    case OpKind::kGpuSetup: return "GPU path setup (the first collective on CUDA tensors)";
    case OpKind::kNcclAllreduce: return "allreduce on CUDA tensors (NCCL path)";
    case OpKind::kNcclBroadcast: return "broadcast on CUDA tensors (NCCL path)";
    case OpKind::kNcclAllgather: return "allgather on CUDA tensors (NCCL path)";
    case OpKind::kNcclNeighborAllreduce: return "neighbor_allreduce on CUDA tensors (NCCL path)";
    case OpKind::kCompressedAllreduce: return "compressed allreduce";
    case OpKind::kChocoNeighborAllreduce: return "compressed (CHOCO) neighbor_allreduce";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAlltoall: return "alltoall";
    case OpKind::kContextSplit: return "context_split";
    case OpKind::kNeighborFrame: return "neighbor data";
    case OpKind::kProbePeers: return "probe_peers";
    case OpKind::kNcclReduceScatter: return "reduce_scatter on CUDA tensors (NCCL path)";
    case OpKind::kNcclAlltoall: return "alltoall on CUDA tensors (NCCL path)";
    case OpKind::kNcclNeighborAllgather: return "neighbor_allgather on CUDA tensors (NCCL path)";
    case OpKind::kContextGrow: return "context_grow";
    case OpKind::kContextShrink: return "context_shrink";
  }
  return "unknown";
}

bool Signature::operator==(const Signature& o) const {
  return seq == o.seq && count == o.count && root == o.root && chunk == o.chunk && kind == o.kind &&
         dtype == o.dtype && reduce == o.reduce && extra == o.extra;
}

std::string DescribeSignature(const Signature& sig) {
  if (sig.kind == OpKind::kSetTopology)
    return Str(sig.extra ? "set_machine_topology" : "set_topology", " #", sig.seq, " (graph fingerprint ", std::hex,
               sig.count, std::dec, ")");
  if (sig.kind == OpKind::kNeighborFrame) {  // name the neighbor operation(s) it carries
    const auto first = static_cast<OpKind>(sig.extra);
    std::string s = Str(OpKindName(first), " #", sig.seq, " (");
    if (sig.dtype < kNumDTypes) s += Str(DTypeName(static_cast<DType>(sig.dtype)), ", ");
    if (sig.count > 1) s += Str("fused with ", sig.count - 1, " more, ");
    return s + "neighbor data)";
  }
  std::string s = Str(OpKindName(sig.kind), " #", sig.seq, " (");
  if (sig.kind == OpKind::kAllreduce || sig.kind == OpKind::kLocalAllreduce || sig.kind == OpKind::kNcclAllreduce ||
      sig.kind == OpKind::kCompressedAllreduce)
    s += Str(ReduceOpName(static_cast<ReduceOp>(sig.reduce)), ", ");
  if (sig.kind != OpKind::kBarrier && sig.dtype < kNumDTypes) s += Str(DTypeName(static_cast<DType>(sig.dtype)), ", ");
  if (sig.kind == OpKind::kAllgather || sig.kind == OpKind::kAllgatherDims || sig.kind == OpKind::kNeighborAllgather)
    s += Str(sig.count, " bytes per row");
  else if (sig.kind != OpKind::kBarrier)
    s += Str(sig.count, " elements");
  if (sig.kind == OpKind::kBroadcast) s += Str(", root ", sig.root);
  if (sig.kind == OpKind::kCompressedAllreduce)  // the names live in impl/compress/codec.cc
    s += Str(", compressor ", static_cast<int>(sig.extra), " with fingerprint 0x", std::hex, static_cast<uint32_t>(sig.root),
             std::dec, ", ", sig.chunk, " bytes compressed");
  s += Str(", chunk ", sig.chunk, ")");
  return s;
}

std::string ValidateFrameHeader(const void* message, size_t length, Header* header) {
  if (length < sizeof(Header)) return Str("a ", length, "-byte message where a header was expected");
  std::memcpy(header, message, sizeof(Header));
  const Header& h = *header;
  if (h.magic != kHeaderMagic) return "a message that is not a Starling header";
  if (h.flags & ~(kFlagPoisoned | kFlagPayloadInline)) return Str("a header with unknown flags 0x", std::hex, h.flags);
  if (FrameTrailerBytes(h) > kMaxFramePayload)
    return Str("a malformed header (a trailer of ", FrameTrailerBytes(h), " bytes)");
  const size_t inline_bytes = length - sizeof(Header);
  if (h.flags & kFlagPayloadInline) {
    if (h.payload_bytes != inline_bytes)
      return Str("a malformed header (", h.payload_bytes, " inline payload bytes in a ", length, "-byte message)");
    return "";
  }
  if (inline_bytes != 0) return Str("a malformed header (", inline_bytes, " unexpected bytes after it)");
  if (h.payload_bytes > kMaxFramePayload || h.chunk < 1 || h.chunk > kMaxMessageBytes)
    return Str("a malformed header (payload of ", h.payload_bytes, " bytes in chunks of ", h.chunk, ")");
  return "";
}

uint64_t FrameTrailerBytes(const Header& h) { return h.sig.kind == OpKind::kNeighborFrame ? h.aux : 0; }

std::string ParseNeighborTable(const Header& h, const char* payload, NeighborTable* table) {
  if (h.sig.kind != OpKind::kNeighborFrame)
    return Str("sent ", DescribeSignature(h.sig),
               " where this rank expected neighbor data; ranks are calling different operations");
  uint64_t table_bytes = 0;
  if (h.sig.count < 0 || !MulFits(h.sig.count, sizeof(SegmentInfo), &table_bytes) || table_bytes > h.payload_bytes)
    return Str("sent a malformed neighbor frame (", h.sig.count, " table entries in ", h.payload_bytes, " bytes)");
  std::vector<SegmentInfo> entries(static_cast<size_t>(h.sig.count));
  if (table_bytes > 0) std::memcpy(entries.data(), payload, table_bytes);
  uint64_t data_bytes = 0;
  for (const SegmentInfo& e : entries) {
    if (e.in_shm > 2) return Str("sent a malformed neighbor frame (shared-memory flag ", int{e.in_shm}, ")");
    if (e.in_shm) continue;  // its data is in the sender's outbox or memory
    if (!AddFits(data_bytes, e.bytes, &data_bytes))
      return "sent a malformed neighbor frame (its segment sizes overflow)";
  }
  const bool packed = h.aux == 0;
  const uint64_t available = packed ? h.payload_bytes - table_bytes : h.aux;
  if (data_bytes != available || (!packed && h.payload_bytes != table_bytes))
    return Str("sent a malformed neighbor frame (segments of ", data_bytes, " bytes where ", available,
               " bytes of data follow)");
  if (!packed && (h.aux > kMaxFramePayload || h.sig.chunk < 1 || h.sig.chunk > kMaxMessageBytes))
    return Str("sent a malformed neighbor frame (", h.aux, " data bytes in chunks of ", h.sig.chunk, ")");
  table->entries = std::move(entries);
  table->packed = packed;
  table->table_bytes = static_cast<size_t>(table_bytes);
  return "";
}

std::string UnpackGatherBlocks(const char* payload, uint64_t bytes, int count, uint64_t row_bytes,
                               std::vector<GatherBlock>* blocks) {
  uint64_t offset = 0;
  if (count < 0 || !MulFits(count, sizeof(GatherMeta), &offset) || offset > bytes)
    return Str("truncated metadata (", count, " entries in ", bytes, " bytes)");
  std::vector<GatherBlock> unpacked(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    GatherBlock& b = unpacked[static_cast<size_t>(i)];
    std::memcpy(&b.meta, payload + static_cast<size_t>(i) * sizeof(GatherMeta), sizeof(GatherMeta));
    if (b.meta.first_dim < 0 || (b.meta.has_data != 0 && b.meta.has_data != 1))
      return Str("malformed metadata (first dimension ", b.meta.first_dim, ", has_data ", b.meta.has_data, ")");
    b.data = payload + offset;
    uint64_t n = 0;
    if (b.meta.has_data && (!BytesFit(b.meta.first_dim, row_bytes, &n) || n > bytes - offset))
      return Str("truncated data (", b.meta.first_dim, " rows of ", row_bytes, " bytes, ", bytes - offset, " left)");
    offset += n;
  }
  if (offset != bytes) return Str("malformed metadata (", bytes - offset, " bytes left over)");
  blocks->insert(blocks->end(), unpacked.begin(), unpacked.end());
  return "";
}

void Agreement::Stamp(Header* header) const {
  header->magic = kHeaderMagic;
  header->sender = rank_;
  header->sig = mine_;
  if (poisoned_) {
    header->flags |= kFlagPoisoned;
    header->culprit_a = culprit_a_;
    header->culprit_b = culprit_b_;
    header->culprit_sig_a = sig_a_;
    header->culprit_sig_b = sig_b_;
  }
}

bool Agreement::Check(const Header& header) {
  if (header.flags & kFlagPoisoned) {
    if (!poisoned_) {
      poisoned_ = true;
      culprit_a_ = header.culprit_a;
      culprit_b_ = header.culprit_b;
      sig_a_ = header.culprit_sig_a;
      sig_b_ = header.culprit_sig_b;
    }
    return false;
  }
  if (header.sig != mine_) {
    if (!poisoned_) {
      poisoned_ = true;
      culprit_a_ = header.sender;
      sig_a_ = header.sig;
      culprit_b_ = rank_;
      sig_b_ = mine_;
    }
    return false;
  }
  return !poisoned_;
}

void ThrowDisagreement(int rank_a, const Signature& a, int rank_b, const Signature& b) {
  Fail(Code::kMismatch, "ranks disagree: rank ", rank_a, " called ", DescribeSignature(a), " while rank ", rank_b,
       " called ", DescribeSignature(b),
       "; every rank must make the same collective calls, in the same order, with matching tensors");
}

void Agreement::ThrowIfPoisoned() const {
  if (poisoned_) ThrowDisagreement(culprit_a_, sig_a_, culprit_b_, sig_b_);
}

}  // namespace starling::ops
