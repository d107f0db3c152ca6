// Fuzz target "board": a peer's shared-memory board (impl/transport/shm/board.h) as
// that process could have written it (any bytes in its header, counters and slot
// headers). Validate must refuse what is not a board, and rounds against an accepted
// one must end in an Error (a corrupted slot, a peer that never arrives) or hand out
// only bytes inside the peer's slots: never an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "impl/common/error.h"
#include "impl/transport/shm/board.h"

using starling::transport::shm::Board;
using starling::transport::shm::WaitPolicy;

namespace {

// Input: up to 512 bytes for the start of the peer's board (header, counters, slot 0's
// header), then up to 128 bytes for each of slot 1's and slot 2's headers.
constexpr size_t kHead = 512;
constexpr size_t kSlotHeader = 128;

char* NewRegion() {
  const size_t bytes = (Board::SegmentBytes() + 127) / 128 * 128;  // exactly: ASan sees past it
  char* region = static_cast<char*>(std::aligned_alloc(128, bytes));
  if (region != nullptr) std::memset(region, 0, bytes);
  return region;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kHead + 2 * kSlotHeader) return 0;
  char* mine = NewRegion();
  char* peer = NewRegion();
  if (mine == nullptr || peer == nullptr) {
    std::free(mine);
    std::free(peer);
    return 0;
  }
  Board::Format(mine);
  std::memcpy(peer, data, size < kHead ? size : kHead);
  for (uint32_t s = 1; s <= 2; ++s) {
    const size_t from = kHead + (s - 1) * kSlotHeader;
    if (size > from) std::memcpy(peer + Board::SlotOffset(s), data + from, size - from < kSlotHeader ? size - from : kSlotHeader);
  }
  try {
    Board::Validate(peer, Board::SegmentBytes(), "fuzzed");
    Board board(0, std::vector<char*>{mine, peer});
    WaitPolicy policy;
    policy.spin_seconds = 0;
    policy.timeout_seconds = 1e-4;  // a peer that never arrives: a timeout, not a hang
    unsigned char tag[Board::kTagBytes] = {};
    const char payload[16] = {};
    volatile unsigned char sink = 0;
    for (int round = 0; round < 4; ++round) {
      try {
        for (const Board::Entry& e : board.Round(tag, round % 2 ? payload : nullptr, sizeof payload, policy, nullptr)) {
          for (size_t i = 0; i < Board::kTagBytes; ++i) sink = sink ^ e.tag[i];
          if (e.data != nullptr)
            for (uint64_t i = 0; i < e.bytes; ++i) sink = sink ^ static_cast<unsigned char>(e.data[i]);
        }
      } catch (const starling::Error&) {
      }
    }
  } catch (const starling::Error&) {
  }
  std::free(mine);
  std::free(peer);
  return 0;
}
