// The board of small collectives (impl/transport/shm/board.h) across real processes:
// every rank sees every rank's tag and data of every round intact, also the round
// before while it runs the next (what a caller may still hold), with ranks at different
// speeds; waits end through their deadline or `check`; what a peer corrupts is an
// Error, never a wrong read.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "impl/common/error.h"
#include "impl/transport/shm/board.h"
#include "tests/unit/child_process.h"

namespace starling::transport::shm {
namespace {

using starling::testing::CodeOf;
using starling::testing::Reap;
using starling::testing::Spawn;

// SegmentBytes() per rank, shared with the children forked after this (MAP_SHARED).
struct SharedBoards {
  explicit SharedBoards(int ranks) {
    for (int r = 0; r < ranks; ++r) {
      void* p = mmap(nullptr, Board::SegmentBytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      EXPECT_NE(p, MAP_FAILED);
      Board::Format(p);
      payloads.push_back(static_cast<char*>(p));
    }
  }
  ~SharedBoards() {
    for (char* p : payloads) munmap(p, Board::SegmentBytes());
  }
  std::vector<char*> payloads;
};

unsigned char Pattern(uint64_t round, int rank, size_t i) {
  return static_cast<unsigned char>(round * 131u + static_cast<size_t>(rank) * 61u + i * 7u + (i >> 8));
}
// Every size from 0 to a full slot comes up; every fifth round posts no data.
size_t SizeOf(uint64_t round) { return (round * 2654435761u) % (Board::kCapacity + 1); }
bool WithData(uint64_t round) { return round % 5 != 0; }

bool Intact(const char* data, uint64_t round, int rank) {
  for (size_t i = 0; i < SizeOf(round); ++i)
    if (static_cast<unsigned char>(data[i]) != Pattern(round, rank, i)) return false;
  return true;
}

// Runs `rounds` rounds as `rank`, checking everything; false at the first wrong byte.
bool RunRank(const std::vector<char*>& payloads, int rank, uint64_t rounds) {
  Board board(rank, payloads);
  WaitPolicy policy;
  policy.spin_seconds = 20e-6;
  policy.timeout_seconds = 60;
  std::vector<unsigned char> data(Board::kCapacity);
  std::vector<const char*> previous;
  for (uint64_t k = 1; k <= rounds; ++k) {
    unsigned char tag[Board::kTagBytes];
    for (size_t i = 0; i < sizeof tag; ++i) tag[i] = static_cast<unsigned char>(k + static_cast<size_t>(rank) + i);
    for (size_t i = 0; i < SizeOf(k); ++i) data[i] = Pattern(k, rank, i);
    const auto entries = board.Round(tag, WithData(k) ? data.data() : nullptr, SizeOf(k), policy, nullptr);
    if (entries.size() != payloads.size()) return false;
    for (int p = 0; p < board.size(); ++p) {
      const Board::Entry& e = entries[static_cast<size_t>(p)];
      for (size_t i = 0; i < Board::kTagBytes; ++i)
        if (e.tag[i] != static_cast<unsigned char>(k + static_cast<size_t>(p) + i)) return false;
      if (!WithData(k)) {
        if (e.data != nullptr || e.bytes != 0) return false;
        continue;
      }
      if (e.data == nullptr || e.bytes != SizeOf(k) || !Intact(e.data, k, p)) return false;
      // The round before stays readable through this one.
      if (k > 1 && WithData(k - 1) && !Intact(previous[static_cast<size_t>(p)], k - 1, p)) return false;
    }
    previous.clear();
    for (const Board::Entry& e : entries) previous.push_back(e.data);
    if (k % 97 == static_cast<uint64_t>(rank)) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // slow
  }
  return true;
}

TEST(ShmBoard, EveryRankSeesEveryRanksPartOfEveryRoundIntact) {
  for (int ranks : {2, 3, 4}) {
    SharedBoards boards(ranks);
    std::vector<pid_t> children;
    for (int r = 1; r < ranks; ++r)
      children.push_back(Spawn([&, r] { return RunRank(boards.payloads, r, 1500); }));
    EXPECT_TRUE(RunRank(boards.payloads, 0, 1500)) << ranks << " ranks";
    for (pid_t pid : children) EXPECT_EQ(Reap(pid), 0) << ranks << " ranks";
  }
}

TEST(ShmBoard, PiecesArePostedOneAfterAnother) {
  SharedBoards boards(1);
  Board board(0, boards.payloads);
  unsigned char tag[Board::kTagBytes] = {7};
  WaitPolicy policy;
  const char head[] = "counts", body[] = "and the input";
  const Board::Piece pieces[] = {{head, 6}, {nullptr, 0}, {body, sizeof body}};
  const auto& entries = board.RoundInPieces(tag, pieces, 3, policy, nullptr);
  ASSERT_EQ(entries[0].bytes, 6 + sizeof body);
  EXPECT_EQ(std::string(entries[0].data, entries[0].bytes), std::string("counts") + std::string(body, sizeof body));
  EXPECT_EQ(entries[0].tag[0], 7);
  EXPECT_EQ(board.RoundInPieces(tag, pieces, 0, policy, nullptr)[0].data, nullptr);  // no pieces: no data
  std::vector<char> big(Board::kCapacity);
  const Board::Piece over[] = {{big.data(), big.size()}, {head, 1}};
  EXPECT_EQ(CodeOf([&] { board.RoundInPieces(tag, over, 2, policy, nullptr); }), Code::kInternal);
}

TEST(ShmBoard, AWaitForAnAbsentRankEndsByItsDeadlineOrCheck) {
  SharedBoards boards(2);
  Board board(0, boards.payloads);
  unsigned char tag[Board::kTagBytes] = {};
  WaitPolicy policy;
  policy.spin_seconds = 0;
  policy.slice_seconds = 0.005;
  policy.timeout_seconds = 0.05;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(CodeOf([&] { board.Round(tag, nullptr, 0, policy, nullptr); }), Code::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  policy.timeout_seconds = 0;
  int checks = 0;
  const std::function<void()> check = [&] {
    if (++checks == 3) Fail(Code::kAborted, "stop");
  };
  Board again(0, boards.payloads);
  EXPECT_EQ(CodeOf([&] { again.Round(tag, nullptr, 0, policy, check); }), Code::kAborted);
}

TEST(ShmBoard, ACorruptedPeerIsAnErrorNotAWrongRead) {
  {
    std::vector<char> foreign(Board::SegmentBytes(), 0x5A);
    EXPECT_EQ(CodeOf([&] { Board::Validate(foreign.data(), foreign.size(), "x"); }), Code::kTransport);
    SharedBoards ok(1);
    EXPECT_EQ(CodeOf([&] { Board::Validate(ok.payloads[0], Board::SegmentBytes() - 1, "x"); }), Code::kTransport);
    EXPECT_EQ(CodeOf([&] { Board::Validate(ok.payloads[0], Board::SegmentBytes(), "x"); }), Code::kOk);
  }
  // Rank 1 announces round 1 but its slot claims another round, then a size past the slot.
  for (int corruption : {0, 1}) {
    SharedBoards boards(2);
    char* slot = boards.payloads[1] + Board::SlotOffset(1);
    const uint32_t round = corruption == 0 ? 7 : 1;
    const uint64_t bytes = corruption == 0 ? 0 : Board::kCapacity + 1;
    std::memcpy(slot, &round, sizeof round);
    std::memcpy(slot + 8, &bytes, sizeof bytes);
    reinterpret_cast<SharedCounter*>(boards.payloads[1] + Board::ArrivedOffset())->value.store(1);  // rank 1's `arrived`
    Board board(0, boards.payloads);
    unsigned char tag[Board::kTagBytes] = {};
    WaitPolicy policy;
    policy.timeout_seconds = 5;
    std::string message;
    EXPECT_EQ(CodeOf([&] { board.Round(tag, nullptr, 0, policy, nullptr); }, &message), Code::kTransport);
    EXPECT_NE(message.find("rank 1's shared-memory board is corrupted"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace starling::transport::shm
