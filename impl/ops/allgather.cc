// allgather with first dimensions that may differ between ranks. Phase 1 (Bruck, in
// ceil(log2 p) rounds): every rank learns every rank's first dimension and output size
// and checks that everyone agrees; small blocks ride along with this metadata. Phase
// 2 (ring, p - 1 steps): the remaining blocks stream straight into the output. When
// every rank of the context shares one host, phase 1 is a round on the board
// (agree.h), which carries blocks up to a slot's size.
#include <cstring>
#include <vector>

#include "impl/common/checked.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

constexpr size_t kTwoRankWithMetadataBytes = 2048;

class AllgatherOp : public runtime::Op {
 public:
  AllgatherOp(const TensorView& in, const TensorView* out, int64_t* first_dims, std::string name)
      : in_(in), gather_(out != nullptr), first_dims_(first_dims), name_(std::move(name)) {
    if (out) out_ = *out;
  }

  std::string Describe() const override {
    return DescribeOp(gather_ ? "allgather" : "allgather_first_dims", name_, in_.Describe());
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = gather_ ? OpKind::kAllgather : OpKind::kAllgatherDims;
    sig.seq = NextSequence(context, sig.kind);
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.row_bytes());
    sig.root = static_cast<int32_t>(TrailingShapeHash(in_) & 0x7fffffff);  // trailing dims must agree
    sig.chunk = static_cast<uint32_t>(context.config().chunk_bytes);
    const int p = context.size();
    const int r = context.rank();

    Exchange ex(context, transport::Channel::kCollective, Label());
    std::vector<GatherBlock> blocks = GatherMetadata(context, ex, sig);  // indexed by rank

    int64_t total = 0;
    for (const GatherBlock& b : blocks) {
      STARLING_CHECK(AddFits(total, b.meta.first_dim, &total), Code::kMismatch, Describe(),
                     ": the gathered first dimensions overflow");
    }
    if (first_dims_ != nullptr) {
      for (int q = 0; q < p; ++q) first_dims_[q] = blocks[q].meta.first_dim;
    }
    if (!gather_) return;
    for (int q = 0; q < p; ++q) {
      STARLING_CHECK(blocks[q].meta.out_first_dim == total, Code::kMismatch, "the output on rank ", q,
                     " has first dimension ", blocks[q].meta.out_first_dim,
                     " but the gathered first dimensions add up to ", total,
                     " (use starling_allgather_first_dims to size it)");
    }
    const size_t row = in_.row_bytes();
    std::vector<size_t> offset(p + 1, 0);
    for (int q = 0; q < p; ++q) offset[q + 1] = offset[q] + static_cast<size_t>(blocks[q].meta.first_dim) * row;
    char* out = static_cast<char*>(out_.data);
    auto copy_local = [&] {
      if (in_.bytes > 0 && out + offset[r] != in_.data) std::memcpy(out + offset[r], in_.data, in_.bytes);
      for (int q = 0; q < p; ++q) {
        if (q != r && blocks[q].meta.has_data && offset[q + 1] > offset[q])
          std::memcpy(out + offset[q], blocks[q].data, offset[q + 1] - offset[q]);
      }
    };
    // Ring for the blocks that did not travel with the metadata. Step 0 sends our own
    // block straight from `in`, so the local copies above overlap the first transfer
    // (they touch none of its memory) instead of delaying it.
    const int right = (r + 1) % p;
    const int left = (r - 1 + p) % p;
    auto streamed = [&](int q) { return !blocks[q].meta.has_data && offset[q + 1] > offset[q]; };
    for (int s = 0; s < p - 1; ++s) {
      const int send_block = (r - s + p) % p;
      const int recv_block = (r - s - 1 + p) % p;
      if (s > 0) ex.Clear();  // step 0 keeps the metadata frames: copy_local reads their payloads
      const size_t send_bytes = offset[send_block + 1] - offset[send_block];
      const size_t recv_bytes = offset[recv_block + 1] - offset[recv_block];
      const char* src = s == 0 ? static_cast<const char*>(in_.data) : out + offset[send_block];
      if (streamed(send_block)) ex.SendRaw(right, src, send_bytes, WholeMessageChunk(send_bytes));
      if (streamed(recv_block))
        ex.RecvRaw(left, out + offset[recv_block], recv_bytes, nullptr, WholeMessageChunk(recv_bytes));
      if (s == 0) copy_local();
      ex.Wait();
    }
    if (p == 1) copy_local();
  }

 private:
  // Bruck's allgather of (metadata, small data), in the dissemination direction shared
  // by every classic collective: before round k rank r knows the blocks of r, r - 1,
  // ..., r - 2^k + 1; it sends them to r + 2^k and receives those of r - 2^k, ...
  std::vector<GatherBlock> GatherMetadata(runtime::Context& context, Exchange& ex, const Signature& sig) {
    const int p = context.size();
    const int r = context.rank();
    std::vector<GatherBlock> on_board;
    if (GatherOnBoard(context, sig, &on_board)) return on_board;
    Agreement agreement(r, sig);
    std::vector<GatherBlock> window;
    window.reserve(p);
    GatherMeta own{r, 0, in_.first_dim(), gather_ ? out_.first_dim() : 0};
    // Blocks up to inline_bytes ride with the metadata. At two ranks the ring is a
    // single direct exchange straight into the output, which beats the extra copies
    // of packing from 2 KiB up (measured; at more ranks its p - 1 steps lose).
    const size_t with_metadata =
        p == 2 ? std::min(kTwoRankWithMetadataBytes, ex.inline_bytes()) : ex.inline_bytes();
    own.has_data = gather_ && in_.bytes <= with_metadata ? 1 : 0;
    window.push_back(GatherBlock{own, static_cast<const char*>(in_.data)});
    for (int k = 0, d = 1; k < DisseminationRounds(p); ++k, d <<= 1) {
      // Post the receive before packing: a peer's early message then lands in place
      // instead of in MPI's unexpected queue (one copy fewer).
      const int frame = ex.RecvFrame((r - d + p) % p);  // the world group: peers by rank
      const size_t count = std::min<size_t>(std::min(d, p - d), window.size());
      size_t bytes = count * sizeof(GatherMeta);
      for (size_t i = 0; i < count; ++i)
        if (window[i].meta.has_data) bytes += static_cast<size_t>(window[i].meta.first_dim) * in_.row_bytes();
      runtime::ScratchPool::Buffer packed = context.scratch().Get(bytes);
      char* cursor = packed.data() + count * sizeof(GatherMeta);
      for (size_t i = 0; i < count; ++i) {
        std::memcpy(packed.data() + i * sizeof(GatherMeta), &window[i].meta, sizeof(GatherMeta));
        if (!window[i].meta.has_data) continue;
        const size_t n = static_cast<size_t>(window[i].meta.first_dim) * in_.row_bytes();
        if (n > 0) std::memcpy(cursor, window[i].data, n);
        cursor += n;
      }
      Header header;
      agreement.Stamp(&header);
      header.payload_bytes = bytes;
      ex.SendFrame((r + d) % p, header, packed.data());
      ex.Wait();  // frames stay alive (no Clear) so their payloads back the blocks
      const Header& h = ex.header(frame);
      if (agreement.Check(h)) {
        const std::string problem =
            UnpackGatherBlocks(ex.payload(frame), h.payload_bytes, std::min(d, p - d), in_.row_bytes(), &window);
        STARLING_CHECK(problem.empty(), Code::kMismatch, Describe(), ": rank ", (r - d + p) % p, " sent ", problem);
      }
    }
    agreement.ThrowIfPoisoned();
    std::vector<GatherBlock> by_rank(p);
    for (int i = 0; i < p; ++i) {
      const int q = (r - i + p) % p;  // window[i] holds rank r - i
      STARLING_CHECK(i < static_cast<int>(window.size()) && window[i].meta.rank == q, Code::kMismatch,
                     Describe(), ": inconsistent metadata from peers; ranks are out of step");
      by_rank[q] = window[i];
    }
    return by_rank;
  }

  // Every rank of the context on one host: one round on the board (agree.h) carries
  // every rank's metadata and, when they fit a slot, its rows. False when the board
  // does not serve this context.
  bool GatherOnBoard(runtime::Context& context, const Signature& sig, std::vector<GatherBlock>* by_rank) {
    const size_t meta = sizeof(GatherMeta);
    const int p = context.size();
    GatherMeta own{context.rank(), 0, in_.first_dim(), gather_ ? out_.first_dim() : 0};
    own.has_data = gather_ && in_.bytes <= transport::shm::Board::kCapacity - meta ? 1 : 0;
    std::vector<Posted> posted;
    const transport::shm::Board::Piece header{&own, meta}, rows{in_.data, own.has_data ? in_.bytes : 0};
    if (!BoardRound(context, WorldGroup(context), sig, {header, rows}, Label(), &posted)) return false;
    by_rank->resize(static_cast<size_t>(p));
    for (int q = 0; q < p; ++q) {
      const Posted& x = posted[static_cast<size_t>(q)];
      GatherMeta m{};
      if (x.data != nullptr && x.bytes >= meta) std::memcpy(&m, x.data, meta);
      uint64_t rows = 0;
      const bool ok = x.data != nullptr && x.bytes >= meta && m.rank == q && m.first_dim >= 0 &&
                      (m.has_data == 0 || m.has_data == 1) &&
                      MulFits(static_cast<uint64_t>(m.first_dim), static_cast<uint64_t>(in_.row_bytes()), &rows) &&
                      x.bytes == meta + (m.has_data ? rows : 0);
      STARLING_CHECK(ok, Code::kMismatch, Describe(), ": rank ", q, " posted inconsistent metadata (", x.bytes,
                     " bytes)");
      (*by_rank)[static_cast<size_t>(q)] = GatherBlock{m, m.has_data ? x.data + meta : nullptr};
    }
    return true;
  }

  TensorView in_;
  TensorView out_;
  bool gather_;
  int64_t* first_dims_;
  std::string name_;
};

void CheckGatherInput(const TensorView& in) {
  STARLING_CHECK_ARG(in.ndim() >= 1, "allgather needs a tensor with at least one dimension, got ", in.Describe(),
                     " (reshape a scalar to [1])");
}

}  // namespace

std::unique_ptr<runtime::Op> MakeAllgather(const runtime::Context& context, const TensorView& in,
                                           const TensorView& out, int64_t* first_dims, std::string name) {
  CheckGatherInput(in);
  bool trailing_equal = in.ndim() == out.ndim();
  for (int i = 1; trailing_equal && i < in.ndim(); ++i) trailing_equal = in.shape[i] == out.shape[i];
  STARLING_CHECK_ARG(in.dtype == out.dtype && trailing_equal, "allgather: out is ", out.Describe(), " but in is ",
                     in.Describe(), "; out must have in's dtype and all dimensions but the first");
  const bool same = in.data == out.data && in.bytes > 0;
  STARLING_CHECK_ARG(!same || context.size() == 1, "allgather cannot run in place: pass a separate out tensor");
  if (!same) CheckInOut(in, out, "in", "out");
  return std::make_unique<AllgatherOp>(in, &out, first_dims, std::move(name));
}

std::unique_ptr<runtime::Op> MakeAllgatherFirstDims(const runtime::Context&, const TensorView& in,
                                                    int64_t* first_dims, std::string name) {
  CheckGatherInput(in);
  STARLING_CHECK_ARG(first_dims != nullptr, "first_dims must not be NULL");
  return std::make_unique<AllgatherOp>(in, nullptr, first_dims, std::move(name));
}

}  // namespace starling::ops
