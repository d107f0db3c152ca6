// broadcast over a group. Small tensors: dissemination (ceil(log2 n) rounds in which
// every member both sends and receives, so a member with another root or shape is
// always noticed); the data spreads like a binomial tree. Large tensors: an agreement
// round, then either a binomial tree of whole messages (ceil(log2 n) hops), or, when
// the tensor is long enough to fill the pipeline, a chain from the root in which each
// member forwards every chunk the moment it lands, so all links stream at once. When
// every rank of the context shares one host, the first step is a round on the board
// (agree.h) instead, which carries the data itself up to a slot's size.
#include <cstring>

#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

constexpr size_t kDisseminationMaxBytes = 64 << 10;

void Disseminate(runtime::Context& context, const Group& group, const TensorView& out, int root_index,
                 const Signature& sig, const LazyText& what) {
  const int n = group.size();
  bool have = group.index == root_index;
  Agreement agreement(context.rank(), sig);
  Exchange ex(context, transport::Channel::kCollective, what);
  for (int k = 0, d = 1; k < DisseminationRounds(n); ++k, d <<= 1) {
    Header header;
    agreement.Stamp(&header);
    header.aux = have ? 1 : 0;
    header.payload_bytes = have ? out.bytes : 0;
    ex.SendFrame(group.peer(d), header, out.data);
    const int frame = ex.RecvFrame(group.peer(-d));
    ex.Wait();
    const Header& h = ex.header(frame);
    if (agreement.Check(h) && !have && h.aux == 1 && h.payload_bytes == out.bytes) {
      if (out.bytes > 0) std::memcpy(out.data, ex.payload(frame), out.bytes);
      have = true;
    }
    ex.Clear();
  }
  agreement.ThrowIfPoisoned();
  STARLING_CHECK(have, Code::kInternal, "broadcast data did not reach rank ", context.rank());
}

void Chain(runtime::Context& context, const Group& group, const TensorView& out, int root_index,
           const LazyText& what) {
  const int n = group.size();
  const int position = (group.index - root_index + n) % n;
  const int next = position < n - 1 ? group.peer(1) : -1;
  char* data = static_cast<char*>(out.data);
  Exchange ex(context, transport::Channel::kCollective, what);
  // Chunks let every link of a longer chain stream at once; two ranks need one message.
  const size_t chunk = n == 2 ? WholeMessageChunk(out.bytes) : ex.chunk_bytes();
  if (position == 0) {
    ex.SendRaw(next, data, out.bytes, chunk);
  } else {
    ex.RecvRaw(
        group.peer(-1), data, out.bytes,
        [&ex, data, next, chunk](const char*, size_t offset, size_t length) {
          if (next >= 0) ex.SendRaw(next, data + offset, length, chunk);
        },
        chunk);
  }
  ex.Wait();
}

void Binomial(runtime::Context& context, const Group& group, const TensorView& out, int root_index,
              const LazyText& what) {
  const int n = group.size();
  const int vrank = (group.index - root_index + n) % n;  // position in the tree
  auto member = [&](int v) { return group.ranks[static_cast<size_t>((v + root_index) % n)]; };
  const size_t chunk = WholeMessageChunk(out.bytes);
  Exchange ex(context, transport::Channel::kCollective, what);
  int mask = 1;
  while (mask < n && !(vrank & mask)) mask <<= 1;
  if (mask < n) {  // not the root: receive from the parent first
    ex.RecvRaw(member(vrank - mask), out.data, out.bytes, nullptr, chunk);
    ex.Wait();
    ex.Clear();
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vrank + mask < n) ex.SendRaw(member(vrank + mask), out.data, out.bytes, chunk);
  ex.Wait();
}

class BroadcastOp : public runtime::Op {
 public:
  BroadcastOp(const TensorView& in, const TensorView& out, int root, std::string name)
      : in_(in), out_(out), root_(root), name_(std::move(name)) {}

  std::string Describe() const override {
    return DescribeOp("broadcast", name_, Str(in_.Describe(), ", root ", root_));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = OpKind::kBroadcast;
    sig.seq = NextSequence(context, sig.kind);
    RunBroadcast(context, WorldGroup(context), in_, out_, root_, sig, Label());
  }

 private:
  TensorView in_, out_;
  int root_;
  std::string name_;
};

}  // namespace

void RunBroadcast(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                  int root_index, Signature sig, const LazyText& what) {
  sig.dtype = static_cast<uint8_t>(in.dtype);
  sig.count = static_cast<int64_t>(in.numel);
  sig.root = root_index;
  sig.chunk = static_cast<uint32_t>(context.config().chunk_bytes);
  if (group.index == root_index && out.data != in.data && in.bytes > 0) std::memcpy(out.data, in.data, in.bytes);
  if (group.size() == 1) return;
  // Every rank of the context on one host: the root posts the data on the board (or,
  // when it is too large for a slot, only the signature: the round is the agreement).
  const bool root = group.index == root_index;
  const bool fits = out.bytes <= transport::shm::Board::kCapacity;
  const void* post = root && fits ? (out.data != nullptr ? out.data : static_cast<const void*>(&sig)) : nullptr;
  std::vector<Posted> posted;
  if (BoardRound(context, group, sig, post, out.bytes, what, &posted)) {
    if (fits) {
      const Posted& from = posted[static_cast<size_t>(root_index)];
      STARLING_CHECK(from.data != nullptr && from.bytes == out.bytes, Code::kTransport,
                     "the broadcast root posted ", from.bytes, " bytes where ", out.bytes, " were expected");
      if (!root && out.bytes > 0) std::memcpy(out.data, from.data, out.bytes);
      return;
    }
  } else if (out.bytes <= kDisseminationMaxBytes) {
    Disseminate(context, group, out, root_index, sig, what);
    return;
  } else {
    Agree(context, group, sig, what);
  }
  // A chain needs about n - 1 chunks in flight before every link is busy.
  const size_t chunk = context.config().chunk_bytes;
  if (group.size() > 2 && out.bytes <= chunk * static_cast<size_t>(group.size() - 1)) {
    Binomial(context, group, out, root_index, what);
  } else {
    Chain(context, group, out, root_index, what);
  }
}

std::unique_ptr<runtime::Op> MakeBroadcast(const runtime::Context& context, const TensorView& in,
                                           const TensorView& out, int root, std::string name) {
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  STARLING_CHECK_ARG(root >= 0 && root < context.size(), "broadcast root ", root, " is out of range [0, ",
                     context.size(), ")");
  return std::make_unique<BroadcastOp>(in, out, root, std::move(name));
}

}  // namespace starling::ops
