// alltoall (equal blocks, or per-rank counts as MPI_Alltoallv). Small equal blocks:
// every rank gathers every input by dissemination and keeps its blocks. Otherwise every rank
// gathers every rank's send and receive counts by dissemination (ceil(log2 n) rounds of
// 16 n bytes, which also agree on the call), so each checks every pair alike and a
// count one rank sends but its peer does not expect fails on every rank, naming both.
// Then all blocks move at once, straight from in into the peers' out. Where every rank
// is on one host (the context's board), the counts round also carries each rank's input
// when it fits the board's slot with them (64 KiB), and when every rank's does, every
// rank copies its blocks out of the board: one round, no message (at 16-64 KiB 0.3-0.9x
// MPI_Alltoall, where reading the inputs, below, was 0.9-1.1x). Else, when each rank may
// read the others' memory, the round carries the address of each rank's input, every
// rank copies its blocks straight out of its peers' inputs into its out
// (process_vm_readv: one copy, no message), and a second round tells every rank that
// its input has been read.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "impl/common/checked.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/sequence.h"
#include "impl/transport/shm/cross_memory.h"

namespace starling::ops {
namespace {

// Gathering whole inputs saves a round but moves n times the data through scratch: it
// won up to a few KiB at two ranks and lost from 16 KiB (measured, 2-core VM under load).
constexpr size_t kAlltoallGatherMaxBytes = 8 << 10;
constexpr size_t kAlltoallGatherMaxTotalBytes = 32 << 10;
// Blocks read straight from the peers' inputs (the board's way, below) when the largest
// is at least this: below, the kernel call and the second round cost more than eager
// messages (alltoallv at 2 ranks: 1-3 KiB blocks 0.7-1.1 us slower, 4-12 KiB 1.8 us
// faster; docs/performance.md).
constexpr size_t kAlltoallReadMinBytes = 4 << 10;

class AlltoallOp : public runtime::Op {
 public:
  AlltoallOp(const TensorView& in, const TensorView& out, std::vector<int64_t> send, std::vector<int64_t> recv,
             bool varying, std::string name)
      : in_(in), out_(out), send_(std::move(send)), recv_(std::move(recv)), varying_(varying),
        name_(std::move(name)) {}

  std::string Describe() const override {
    return DescribeOp("alltoall", name_, Str(in_.Describe(), " -> ", out_.Describe()));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = OpKind::kAlltoall;
    sig.seq = NextSequence(context, sig.kind);
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.extra = varying_ ? 1 : 0;
    sig.count = varying_ ? 0 : static_cast<int64_t>(in_.numel);
    const Group group = WorldGroup(context);
    const int n = group.size();
    const int me = group.index;
    const size_t elem = DTypeSize(in_.dtype);
    if (n == 1) {
      // The one pair is this rank with itself (the fuzzer found the copy overflowing out).
      STARLING_CHECK(send_[0] == recv_[0], Code::kMismatch, Describe(), ": rank 0 sends ", send_[0],
                     " elements to rank 0, which expects ", recv_[0],
                     " (recv_counts[q] on rank r must equal send_counts[r] on rank q)");
      if (in_.bytes > 0) std::memcpy(out_.data, in_.data, in_.bytes);
      return;
    }
    if (!varying_ && in_.bytes <= kAlltoallGatherMaxBytes && in_.bytes * static_cast<size_t>(n - 1) <= kAlltoallGatherMaxTotalBytes) {
      // Small equal blocks: gather every rank's whole input in the agreement's own rounds
      // (one round at two ranks, as MPI's) and keep the blocks meant for this rank.
      Exchange ex(context, transport::Channel::kCollective, Label());
      const std::vector<const char*> all = DisseminationGather(context, group, sig, in_.data, in_.bytes, ex);
      const size_t block = in_.bytes / static_cast<size_t>(n);
      for (int q = 0; q < n && block > 0; ++q)
        std::memcpy(static_cast<char*>(out_.data) + static_cast<size_t>(q) * block,
                    all[static_cast<size_t>(q)] + static_cast<size_t>(me) * block, block);
      return;
    }
    std::vector<size_t> send_at(static_cast<size_t>(n) + 1, 0), recv_at(static_cast<size_t>(n) + 1, 0);
    for (int q = 0; q < n; ++q) {
      send_at[q + 1] = send_at[q] + static_cast<size_t>(send_[static_cast<size_t>(q)]) * elem;
      recv_at[q + 1] = recv_at[q] + static_cast<size_t>(recv_[static_cast<size_t>(q)]) * elem;
    }
    bool moved = false;
    if (!ReadOnBoard(context, group, sig, recv_at, &moved))
      AgreeOnAlltoallCounts(context, group, sig, send_, recv_, Describe(), Label());
    if (moved) return;
    const char* src = static_cast<const char*>(in_.data);
    char* dst = static_cast<char*>(out_.data);
    Exchange ex(context, transport::Channel::kCollective, Label());
    for (int k = 1; k < n; ++k) {
      const int from = group.peer(-k);
      const size_t length = recv_at[from + 1] - recv_at[from];
      if (length > 0) ex.RecvRaw(from, dst + recv_at[from], length, nullptr, WholeMessageChunk(length));
    }
    for (int k = 1; k < n; ++k) {
      const int to = group.peer(k);
      const size_t length = send_at[to + 1] - send_at[to];
      if (length > 0) ex.SendRaw(to, src + send_at[to], length, WholeMessageChunk(length));
    }
    const size_t own = send_at[me + 1] - send_at[me];
    if (own > 0) std::memcpy(dst + recv_at[me], src + send_at[me], own);
    ex.Wait();
  }

 private:
  // The board's way (see the top): false when the board does not serve the group
  // (nothing happened). Else the counts are agreed and, when every rank may read every
  // other's memory (*moved), every block is in out.
  bool ReadOnBoard(runtime::Context& context, const Group& group, const Signature& sig,
                   const std::vector<size_t>& recv_at, bool* moved) {
    const auto links = context.shm_links();
    const int n = group.size();
    // address, flags (kReadable, kInline), send counts, recv counts; then the input if inline
    const size_t words = 2 + 2 * static_cast<size_t>(n);
    const size_t head = words * sizeof(int64_t);
    constexpr int64_t kReadable = 1, kInline = 2;
    if (!links || links->board() == nullptr || head > transport::shm::Board::kCapacity) return false;
    const bool inline_input = head + in_.bytes <= transport::shm::Board::kCapacity;
    std::vector<int64_t> mine(words);
    mine[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(in_.data));
    mine[1] = kReadable | (inline_input ? kInline : 0);
    for (int r : group.ranks)
      if (r != group.ranks[static_cast<size_t>(group.index)] && !links->can_read(r)) mine[1] &= ~kReadable;
    std::copy(send_.begin(), send_.end(), mine.begin() + 2);
    std::copy(recv_.begin(), recv_.end(), mine.begin() + 2 + n);
    std::vector<Posted> posted;
    const transport::shm::Board::Piece counts{mine.data(), head}, input{in_.data, inline_input ? in_.bytes : 0};
    if (!BoardRound(context, group, sig, {counts, input}, Label(), &posted)) return false;
    auto word = [&](int position, size_t index) {
      int64_t value;
      std::memcpy(&value, posted[static_cast<size_t>(position)].data + index * sizeof value, sizeof value);
      return value;
    };
    for (int q = 0; q < n; ++q)
      STARLING_CHECK(posted[static_cast<size_t>(q)].data != nullptr && posted[static_cast<size_t>(q)].bytes >= head,
                     Code::kMismatch, Describe(), ": rank ", group.ranks[static_cast<size_t>(q)], " posted ",
                     posted[static_cast<size_t>(q)].bytes, " bytes of counts where this rank has ", head);
    const size_t elem = DTypeSize(in_.dtype);
    bool readable = true, all_inline = true;
    uint64_t largest = 0;  // block, in elements, between two ranks
    for (int q = 0; q < n; ++q) {
      readable = readable && (word(q, 1) & kReadable) != 0;
      uint64_t input = 0;  // q's input bytes, from its counts (each bounded: no overflow)
      for (int r = 0; r < n; ++r) {
        const int64_t sends = word(q, 2 + static_cast<size_t>(r)), expects = word(r, 2 + n + static_cast<size_t>(q));
        STARLING_CHECK(sends >= 0 && sends <= (int64_t{1} << 48), Code::kMismatch, Describe(), ": rank ",
                       group.ranks[static_cast<size_t>(q)], " posted a count of ", sends);
        STARLING_CHECK(sends == expects, Code::kMismatch, Describe(), ": rank ", group.ranks[static_cast<size_t>(q)],
                       " sends ", sends, " elements to rank ", group.ranks[static_cast<size_t>(r)], ", which expects ",
                       expects, " (recv_counts[q] on rank r must equal send_counts[r] on rank q)");
        input += static_cast<uint64_t>(sends) * elem;
        if (q != r) largest = std::max<uint64_t>(largest, static_cast<uint64_t>(sends));
      }
      const bool inlined = (word(q, 1) & kInline) != 0;
      all_inline = all_inline && inlined;
      STARLING_CHECK(posted[static_cast<size_t>(q)].bytes == head + (inlined ? input : 0), Code::kMismatch,
                     Describe(), ": rank ", group.ranks[static_cast<size_t>(q)], " posted ",
                     posted[static_cast<size_t>(q)].bytes, " bytes for ", head, " bytes of counts",
                     inlined ? Str(" and an input of ", input, " bytes") : std::string());
    }
    const int me = group.index;
    char* dst = static_cast<char*>(out_.data);
    auto offset_in = [&](int q) {  // of this rank's block in q's input
      uint64_t offset = 0;
      for (int j = 0; j < me; ++j) offset += static_cast<uint64_t>(word(q, 2 + static_cast<size_t>(j))) * elem;
      return offset;
    };
    if (all_inline) {  // every block is on the board, valid until this rank's second later round
      for (int q = 0; q < n; ++q) {
        const size_t length = recv_at[static_cast<size_t>(q) + 1] - recv_at[static_cast<size_t>(q)];
        if (length > 0)
          std::memcpy(dst + recv_at[static_cast<size_t>(q)], posted[static_cast<size_t>(q)].data + head + offset_in(q),
                      length);
      }
      *moved = true;
      return true;
    }
    // Small blocks go faster by message (eager, no kernel call, no second round). Every
    // rank decides alike, from the counts all posted.
    if (!readable || largest * elem < kAlltoallReadMinBytes) return true;  // the blocks go by message
    transport::Traffic* traffic = context.transport().traffic();
    std::string failure;
    Code code = Code::kTransport;
    for (int k = 0; k < n && failure.empty(); ++k) {
      const int q = (me + k) % n;  // each rank starts with itself, then its successors: spread over the inputs
      const size_t length = recv_at[static_cast<size_t>(q) + 1] - recv_at[static_cast<size_t>(q)];
      const uint64_t offset = offset_in(q);
      if (length == 0) continue;
      const uint64_t from = static_cast<uint64_t>(word(q, 0)) + offset;
      if (q == me) {
        std::memcpy(dst + recv_at[static_cast<size_t>(q)], static_cast<const char*>(in_.data) + offset, length);
        continue;
      }
      const int peer = group.ranks[static_cast<size_t>(q)];
      const int error = transport::shm::ReadProcessMemory(links->pid_of(peer), from, dst + recv_at[q], length);
      if (error != 0) {
        code = error == ESRCH ? Code::kPeerFailed : Code::kTransport;
        failure = Str(Describe(), ": cannot read rank ", peer, "'s input (", std::strerror(error), ")");
      } else if (traffic) {
        traffic->ReceivedShared(peer, length);
        traffic->SentShared(peer, static_cast<size_t>(word(me, 2 + static_cast<size_t>(q))) * elem);
      }
    }
    // Every rank's input stays as it is until every rank has read it.
    Signature done = sig;
    done.extra |= 2;
    BoardRound(context, group, done, nullptr, 0, Label(), &posted);
    STARLING_CHECK(failure.empty(), code, failure);
    *moved = true;
    return true;
  }

  TensorView in_, out_;
  std::vector<int64_t> send_, recv_;
  bool varying_;
  std::string name_;
};

std::vector<int64_t> CopyCounts(const int64_t* counts, int n, size_t numel, const char* what, const char* tensor) {
  std::vector<int64_t> copy(static_cast<size_t>(n));
  int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    copy[static_cast<size_t>(r)] = counts[r];
    STARLING_CHECK_ARG(counts[r] >= 0, "alltoall: ", what, "[", r, "] is negative (", counts[r], ")");
    STARLING_CHECK_ARG(AddFits(total, counts[r], &total), "alltoall: the ", what, " overflow");
  }
  STARLING_CHECK_ARG(static_cast<uint64_t>(total) == numel, "alltoall: the ", what, " sum to ", total, " but ",
                     tensor, " has ", numel, " elements");
  return copy;
}

}  // namespace

void AgreeOnAlltoallCounts(runtime::Context& context, const Group& group, const Signature& sig,
                           const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
                           const std::string& what, const LazyText& label) {
  const int n = group.size();
  std::vector<int64_t> mine(send);  // [send 0..n-1][recv 0..n-1]
  mine.insert(mine.end(), recv.begin(), recv.end());
  const size_t bytes = mine.size() * sizeof(int64_t);
  Exchange ex(context, transport::Channel::kCollective, label);
  const std::vector<const char*> all = DisseminationGather(context, group, sig, mine.data(), bytes, ex);
  auto count = [&](int rank, int index) {
    int64_t value;
    std::memcpy(&value, all[static_cast<size_t>(rank)] + static_cast<size_t>(index) * sizeof value, sizeof value);
    return value;
  };
  for (int q = 0; q < n; ++q) {
    for (int r = 0; r < n; ++r) {
      const int64_t sends = count(q, r), expects = count(r, n + q);
      STARLING_CHECK(sends == expects, Code::kMismatch, what, ": rank ", q, " sends ", sends, " elements to rank ", r,
                     ", which expects ", expects, " (recv_counts[q] on rank r must equal send_counts[r] on rank q)");
    }
  }
}

std::unique_ptr<runtime::Op> MakeAlltoall(const runtime::Context& context, const TensorView& in,
                                          const TensorView& out, const int64_t* send_counts,
                                          const int64_t* recv_counts, std::string name) {
  const int n = context.size();
  STARLING_CHECK_ARG(in.dtype == out.dtype, "alltoall: in is ", in.Describe(), " but out is ", out.Describe(),
                     "; they must have the same dtype");
  STARLING_CHECK_ARG((send_counts == nullptr) == (recv_counts == nullptr),
                     "alltoall: pass both send_counts and recv_counts, or neither (equal blocks); got only ",
                     send_counts ? "send_counts" : "recv_counts");
  const bool varying = send_counts != nullptr;
  std::vector<int64_t> send, recv;
  if (varying) {
    send = CopyCounts(send_counts, n, in.numel, "send_counts", "in");
    recv = CopyCounts(recv_counts, n, out.numel, "recv_counts", "out");
  } else {
    STARLING_CHECK_ARG(in.numel == out.numel && in.numel % static_cast<size_t>(n) == 0, "alltoall: in has ",
                       in.numel, " elements and out ", out.numel,
                       "; with equal blocks both need the same element count, a multiple of size() = ", n);
    send.assign(static_cast<size_t>(n), static_cast<int64_t>(in.numel / static_cast<size_t>(n)));
    recv = send;
  }
  if (in.bytes > 0 && out.bytes > 0) {
    const auto a = reinterpret_cast<uintptr_t>(in.data);
    const auto b = reinterpret_cast<uintptr_t>(out.data);
    STARLING_CHECK_ARG(a + in.bytes <= b || b + out.bytes <= a,
                       "alltoall cannot run in place: in and out overlap; pass a separate out tensor");
  }
  return std::make_unique<AlltoallOp>(in, out, std::move(send), std::move(recv), varying, std::move(name));
}

}  // namespace starling::ops
