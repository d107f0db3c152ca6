// broadcast. Small tensors: dissemination (ceil(log2 p) rounds in which every rank
// both sends and receives, so a rank with a different root or shape is always
// noticed); the data spreads like a binomial tree. Large tensors: an agreement round,
// then a pipelined chain from the root: each rank forwards every chunk the moment it
// lands, so all links stream at once.
#include <cstring>

#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"

namespace starling::ops {
namespace {

constexpr size_t kDisseminationMaxBytes = 64 << 10;

class BroadcastOp : public runtime::Op {
 public:
  BroadcastOp(const TensorView& in, const TensorView& out, int root, std::string name)
      : in_(in), out_(out), root_(root), name_(std::move(name)) {}

  std::string Describe() const override {
    return DescribeOp("broadcast", name_, Str(in_.Describe(), ", root ", root_));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.seq = context.NextSequence();
    sig.kind = OpKind::kBroadcast;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.root = root_;
    sig.chunk = static_cast<uint32_t>(context.config().chunk_bytes);
    const int r = context.rank();
    if (r == root_ && out_.data != in_.data && in_.bytes > 0) std::memcpy(out_.data, in_.data, in_.bytes);
    if (context.size() == 1) return;
    if (out_.bytes <= kDisseminationMaxBytes) {
      Disseminate(context, sig);
    } else {
      Agree(context, sig, Describe());
      Chain(context);
    }
  }

 private:
  void Disseminate(runtime::Context& context, const Signature& sig) {
    const int p = context.size();
    const int r = context.rank();
    bool have = r == root_;
    Agreement agreement(r, sig);
    Exchange ex(context, transport::Channel::kCollective, Describe());
    for (int k = 0, d = 1; k < DisseminationRounds(p); ++k, d <<= 1) {
      Header header;
      agreement.Stamp(&header);
      header.aux = have ? 1 : 0;
      header.payload_bytes = have ? out_.bytes : 0;
      ex.SendFrame((r + d) % p, header, out_.data);
      const int frame = ex.RecvFrame((r - d + p) % p);
      ex.Wait();
      const Header& h = ex.header(frame);
      if (agreement.Check(h) && !have && h.aux == 1 && h.payload_bytes == out_.bytes) {
        if (out_.bytes > 0) std::memcpy(out_.data, ex.payload(frame), out_.bytes);
        have = true;
      }
      ex.Clear();
    }
    agreement.ThrowIfPoisoned();
    STARLING_CHECK(have, Code::kInternal, "broadcast data did not reach rank ", r);
  }

  void Chain(runtime::Context& context) {
    const int p = context.size();
    const int r = context.rank();
    const int position = (r - root_ + p) % p;
    const int next = position < p - 1 ? (r + 1) % p : -1;
    const int prev = (r - 1 + p) % p;
    char* out = static_cast<char*>(out_.data);
    Exchange ex(context, transport::Channel::kCollective, Describe());
    if (position == 0) {
      ex.SendRaw(next, out, out_.bytes);
    } else {
      ex.RecvRaw(prev, out, out_.bytes, [&ex, out, next](const char*, size_t offset, size_t length) {
        if (next >= 0) ex.SendRaw(next, out + offset, length);
      });
    }
    ex.Wait();
  }

  TensorView in_, out_;
  int root_;
  std::string name_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakeBroadcast(const runtime::Context& context, const TensorView& in,
                                           const TensorView& out, int root, std::string name) {
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  STARLING_CHECK_ARG(root >= 0 && root < context.size(), "broadcast root ", root, " is out of range [0, ",
                     context.size(), ")");
  return std::make_unique<BroadcastOp>(in, out, root, std::move(name));
}

}  // namespace starling::ops
