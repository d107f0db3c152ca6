#include "impl/transport/shm/board.h"

#include <cstddef>
#include <cstring>
#include <new>

#include "impl/common/error.h"

namespace starling::transport::shm {
namespace {

constexpr uint64_t kBoardMagic = 0x3144524F42545453ull;  // "STTBORD1"
constexpr uint32_t kBoardLayoutVersion = 1;
constexpr size_t kLine = 128;

struct BoardHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t slots;
  uint64_t capacity;
};

}  // namespace

struct Board::Control {
  SharedCounter arrived;  // the last round whose slot this rank filled (32-bit, wraps)
};

struct alignas(kLine) Board::SlotHeader {
  uint32_t round;
  uint32_t has_data;
  uint64_t bytes;
  unsigned char tag[kTagBytes];
};

namespace {

constexpr size_t kControlOffset = kLine;
constexpr size_t kSlotsOffset = kControlOffset + sizeof(SharedCounter);
constexpr size_t kSlotStride = kLine + (Board::kCapacity + kLine - 1) / kLine * kLine;  // slots on whole lines
static_assert(kLine >= 2 * sizeof(uint64_t) + Board::kTagBytes, "a slot header fits its line");
static_assert(kSlotsOffset % kLine == 0 && kSlotStride % kLine == 0, "slot headers start on whole lines");

}  // namespace

size_t Board::SegmentBytes() { return kSlotsOffset + kSlots * kSlotStride; }

size_t Board::SlotOffset(uint32_t slot) { return kSlotsOffset + slot * kSlotStride; }

size_t Board::ArrivedOffset() { return kControlOffset; }  // Control holds `arrived` only

void Board::Format(void* payload) {
  char* base = static_cast<char*>(payload);
  auto* header = new (base) BoardHeader{};
  header->magic = kBoardMagic;
  header->layout_version = kBoardLayoutVersion;
  header->slots = kSlots;
  header->capacity = kCapacity;
  new (base + kControlOffset) Control{};
  for (uint32_t s = 0; s < kSlots; ++s) new (base + kSlotsOffset + s * kSlotStride) SlotHeader{};
}

void Board::Validate(const void* payload, size_t bytes, const std::string& name) {
  STARLING_CHECK(bytes >= SegmentBytes(), Code::kTransport, "shared-memory board ", name, " is too small (", bytes,
                 " bytes)");
  // A copy: another process may change the header while we check it.
  BoardHeader h;
  std::memcpy(&h, payload, sizeof h);
  STARLING_CHECK(h.magic == kBoardMagic && h.layout_version == kBoardLayoutVersion && h.slots == kSlots &&
                     h.capacity == kCapacity,
                 Code::kTransport, "shared-memory board ", name, " has a corrupted or foreign header");
}

std::vector<char*> Board::Payloads(const std::vector<Segment>& segments) {
  std::vector<char*> payloads;
  for (const Segment& s : segments) {
    STARLING_CHECK(s.valid() && s.payload_bytes() >= SegmentBytes(), Code::kInternal, "board: a segment is missing");
    payloads.push_back(static_cast<char*>(s.payload()));
  }
  return payloads;
}

Board::Board(int rank, std::vector<Segment> segments) : Board(rank, Payloads(segments), std::move(segments)) {}

Board::Board(int rank, std::vector<char*> payloads) : Board(rank, std::move(payloads), std::vector<Segment>{}) {}

Board::Board(int rank, std::vector<char*>&& payloads, std::vector<Segment>&& segments)
    : rank_(rank),
      segments_(std::move(segments)),
      bases_(std::move(payloads)),
      tags_(bases_.size() * kTagBytes) {
  STARLING_CHECK(rank_ >= 0 && rank_ < size(), Code::kInternal, "board: rank ", rank_, " of ", size());
}

Board::Control& Board::control(int rank) const {
  return *reinterpret_cast<Control*>(bases_[static_cast<size_t>(rank)] + kControlOffset);
}

Board::SlotHeader& Board::slot_header(int rank, uint64_t count) const {
  return *reinterpret_cast<SlotHeader*>(bases_[static_cast<size_t>(rank)] + kSlotsOffset +
                                        (count % kSlots) * kSlotStride);
}

char* Board::slot_data(int rank, uint64_t count) const {
  return reinterpret_cast<char*>(&slot_header(rank, count)) + kLine;
}

const std::vector<Board::Entry>& Board::Round(const void* tag, const void* data, uint64_t bytes, const WaitPolicy& policy,
                                       const std::function<void()>& check) {
  const Piece whole{data, bytes};
  return RoundInPieces(tag, &whole, data != nullptr ? 1 : 0, policy, check);
}

const std::vector<Board::Entry>& Board::RoundInPieces(const void* tag, const Piece* pieces, size_t parts,
                                                      const WaitPolicy& policy, const std::function<void()>& check) {
  uint64_t bytes = 0;
  for (size_t k = 0; k < parts; ++k) {
    STARLING_CHECK(pieces[k].bytes <= kCapacity - bytes, Code::kInternal, "board: ", bytes, " + ", pieces[k].bytes,
                   " bytes exceed a slot");
    bytes += pieces[k].bytes;
  }
  // 64 bits here pick the slot (2^32 is not a multiple of 3); the shared counters and
  // headers carry the low 32 bits and compare them wrap-safely.
  const uint64_t count = ++count_;
  const uint32_t round = static_cast<uint32_t>(count);
  const int n = size();
  SlotHeader& mine = slot_header(rank_, count);
  std::memcpy(mine.tag, tag, kTagBytes);
  mine.has_data = parts > 0 ? 1 : 0;
  mine.bytes = bytes;
  mine.round = round;
  char* at = slot_data(rank_, count);
  for (size_t k = 0; k < parts; ++k) {
    if (pieces[k].bytes > 0) std::memcpy(at, pieces[k].data, pieces[k].bytes);
    at += pieces[k].bytes;
  }
  Set(control(rank_).arrived, round);  // release: the slot before the number

  entries_.resize(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    const size_t i = static_cast<size_t>(p);
    if (p != rank_)
      WaitUntil(control(p).arrived, [round](uint32_t v) { return AtOrAfter(v, round); }, policy, check,
                "a peer to post its part of a collective in shared memory");
    SlotHeader h;
    std::memcpy(&h, &slot_header(p, count), sizeof h);
    STARLING_CHECK(h.round == round && h.has_data <= 1 && h.bytes <= kCapacity, Code::kTransport,
                   "rank ", p, "'s shared-memory board is corrupted: slot of round ", h.round, " (", h.bytes,
                   " bytes) where round ", round, " was expected");
    unsigned char* tag = tags_.data() + i * kTagBytes;
    std::memcpy(tag, h.tag, kTagBytes);
    entries_[i] = Entry{tag, h.has_data ? slot_data(p, count) : nullptr, h.bytes};
  }
  return entries_;
}

}  // namespace starling::transport::shm
