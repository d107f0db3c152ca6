#include "impl/windows/slots.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <new>

#include "impl/common/error.h"

namespace starling::windows {
namespace {

constexpr uint64_t kSlotsMagic = 0x31534C5357545453ull;  // "STTWSLS1"
constexpr uint32_t kSlotsLayoutVersion = 3;
constexpr size_t kSlotsLine = 128;
constexpr uint32_t kMaxSlots = 1u << 16;

size_t RoundUp(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

// The first line of a shared area. Then: the tensor line (TensorState), the readers'
// ranks and their read counters, the origins' ranks, the slots.
struct SlotsHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t window_id;
  int32_t owner;
  uint32_t slots;
  uint64_t tensor_bytes;
  uint32_t readers;
  uint32_t reserved;
  uint64_t tensor_address;
};
static_assert(sizeof(SlotsHeader) <= kSlotsLine, "the header fits its line");
static_assert(sizeof(TensorState) == kSlotsLine, "the tensor state has its own line");

size_t DirectoryBytes(size_t slots) { return RoundUp(slots * sizeof(int32_t), kSlotsLine); }
size_t CountersBytes(size_t readers) { return RoundUp(readers * sizeof(uint64_t), kSlotsLine); }
size_t ReadersOffset() { return 2 * kSlotsLine; }
size_t CountersOffset(size_t readers) { return ReadersOffset() + DirectoryBytes(readers); }
size_t OriginsOffset(size_t readers) { return CountersOffset(readers) + CountersBytes(readers); }
static_assert(std::atomic<uint64_t>::is_always_lock_free, "read counters live in shared memory");
size_t BufferBytes(size_t bytes) { return RoundUp(bytes > 0 ? bytes : 1, kSlotsLine); }
size_t SlotStride(size_t bytes) { return sizeof(SlotState) + 2 * BufferBytes(bytes); }

void Fill(const Slot& slot, size_t bytes, const void* initial) {
  for (char* buffer : slot.buffers) {
    if (initial != nullptr && bytes > 0) {
      std::memcpy(buffer, initial, bytes);
    } else {
      std::memset(buffer, 0, BufferBytes(bytes));
    }
  }
}

}  // namespace

char* Slot::value() const {
  const uint32_t c = state->current.load(std::memory_order_acquire);
  STARLING_CHECK(c <= 1, Code::kTransport, "a window buffer's index in shared memory is corrupted (", c, ")");
  return buffers[c];
}

char* Slot::other() const {
  const uint32_t c = state->current.load(std::memory_order_acquire);
  STARLING_CHECK(c <= 1, Code::kTransport, "a window buffer's index in shared memory is corrupted (", c, ")");
  return buffers[c ^ 1];
}

void SlotArea::Layout(char* first, size_t slots, size_t bytes) {
  first_ = first;
  slots_ = slots;
  buffer_ = BufferBytes(bytes);
  stride_ = SlotStride(bytes);
}

Slot SlotArea::slot(size_t index) const {
  Slot s;
  char* base = first_ + index * stride_;
  s.state = reinterpret_cast<SlotState*>(base);
  s.buffers[0] = base + sizeof(SlotState);
  s.buffers[1] = s.buffers[0] + buffer_;
  return s;
}

SlotArea SlotArea::Private(size_t slots, size_t bytes, const void* initial) {
  SlotArea area;
  if (slots == 0) return area;
  area.heap_.reset(new char[slots * SlotStride(bytes) + kSlotsLine]);
  char* aligned = area.heap_.get() + (kSlotsLine - reinterpret_cast<uintptr_t>(area.heap_.get()) % kSlotsLine) % kSlotsLine;
  area.Layout(aligned, slots, bytes);
  for (size_t i = 0; i < slots; ++i) {
    Slot s = area.slot(i);
    new (s.state) SlotState();
    Fill(s, bytes, initial);
  }
  return area;
}

size_t SlotArea::SlotsOffset(size_t slots, size_t readers) { return OriginsOffset(readers) + DirectoryBytes(slots); }

std::atomic<uint64_t>* SlotArea::read_count(size_t index) const {
  return index < readers_ ? read_counts_ + index : nullptr;
}

SlotArea SlotArea::Share(const std::string& name, uint32_t window_id, int owner, const std::vector<int>& origins,
                         const std::vector<int>& readers, size_t bytes, const void* initial, uint64_t tensor_address,
                         const transport::shm::SegmentOptions& options) {
  STARLING_CHECK_ARG(!(origins.empty() && readers.empty()) && origins.size() <= kMaxSlots &&
                         readers.size() <= kMaxSlots,
                     "a shared window area has 1 to ", kMaxSlots, " slots or readers, not ", origins.size(), " and ",
                     readers.size());
  const size_t slots = origins.size();
  const size_t total = SlotsOffset(slots, readers.size()) + slots * SlotStride(bytes);
  // A rank that both puts and gets maps the segment once.
  std::vector<int> mappers;
  std::set_union(origins.begin(), origins.end(), readers.begin(), readers.end(), std::back_inserter(mappers));
  SlotArea area;
  area.segment_ = std::make_shared<transport::shm::Segment>(
      transport::shm::Segment::Create(name, total, static_cast<uint32_t>(mappers.size()), options));
  char* base = static_cast<char*>(area.segment_->payload());
  area.region_ = base;
  area.region_bytes_ = total;
  area.tensor_state_ = new (base + kSlotsLine) TensorState();
  area.tensor_address_ = tensor_address;
  auto* reader_ranks = reinterpret_cast<int32_t*>(base + ReadersOffset());
  area.read_counts_ = reinterpret_cast<std::atomic<uint64_t>*>(base + CountersOffset(readers.size()));
  area.readers_ = readers.size();
  for (size_t i = 0; i < readers.size(); ++i) {
    reader_ranks[i] = readers[i];
    new (area.read_counts_ + i) std::atomic<uint64_t>(0);
  }
  auto* directory = reinterpret_cast<int32_t*>(base + OriginsOffset(readers.size()));
  for (size_t i = 0; i < slots; ++i) directory[i] = origins[i];
  area.Layout(base + SlotsOffset(slots, readers.size()), slots, bytes);
  for (size_t i = 0; i < slots; ++i) {
    Slot s = area.slot(i);
    new (s.state) SlotState();
    Fill(s, bytes, initial);
  }
  // The header last, with a release store of its magic: a peer that maps the segment
  // after the creation's agreement sees everything above.
  auto* header = new (base) SlotsHeader{};
  header->layout_version = kSlotsLayoutVersion;
  header->window_id = window_id;
  header->owner = owner;
  header->slots = static_cast<uint32_t>(slots);
  header->tensor_bytes = bytes;
  header->readers = static_cast<uint32_t>(readers.size());
  header->tensor_address = tensor_address;
  reinterpret_cast<std::atomic<uint64_t>*>(&header->magic)->store(kSlotsMagic, std::memory_order_release);
  return area;
}

SlotArea SlotArea::Attach(const std::string& name, uint32_t window_id, int owner, int peer, size_t bytes,
                          size_t* slot, const transport::shm::SegmentOptions& options) {
  auto segment = std::make_shared<transport::shm::Segment>(transport::shm::Segment::Open(name, options));
  SlotArea area = View(segment->payload(), segment->payload_bytes(), window_id, owner, peer, bytes, slot);
  area.segment_ = std::move(segment);
  return area;
}

SlotArea SlotArea::View(void* region, size_t have, uint32_t window_id, int owner, int peer, size_t bytes,
                        size_t* slot) {
  char* base = static_cast<char*>(region);
  STARLING_CHECK(have >= 2 * kSlotsLine, Code::kTransport, "window segment is too small (", have, " bytes)");
  const auto* header = reinterpret_cast<const SlotsHeader*>(base);
  const uint64_t magic =
      reinterpret_cast<const std::atomic<uint64_t>*>(&header->magic)->load(std::memory_order_acquire);
  STARLING_CHECK(magic == kSlotsMagic && header->layout_version == kSlotsLayoutVersion, Code::kTransport,
                 "not a window's segment (magic ", magic, ", layout ", header->layout_version, ")");
  STARLING_CHECK(header->window_id == window_id && header->owner == owner && header->tensor_bytes == bytes &&
                     header->slots <= kMaxSlots && header->readers <= kMaxSlots,
                 Code::kTransport, "the segment holds window #", header->window_id, " of rank ", header->owner, " (",
                 header->tensor_bytes, " bytes, ", header->slots, " slots, ", header->readers,
                 " readers), not window #", window_id, " of rank ", owner, " (", bytes, " bytes)");
  const size_t slots = header->slots, readers = header->readers;
  const size_t total = SlotsOffset(slots, readers) + slots * SlotStride(bytes);
  // (bytes <= have first: with slots, the total cannot then overflow.)
  STARLING_CHECK((slots == 0 || bytes <= have) && have >= total, Code::kTransport,
                 "the window segment is too small for its ", slots, " slots and ", readers, " readers (", have,
                 " bytes)");
  SlotArea area;
  area.region_ = base;
  area.region_bytes_ = total;
  area.tensor_state_ = reinterpret_cast<TensorState*>(base + kSlotsLine);
  area.tensor_address_ = header->tensor_address;
  area.read_counts_ = reinterpret_cast<std::atomic<uint64_t>*>(base + CountersOffset(readers));
  area.readers_ = readers;
  const auto* reader_ranks = reinterpret_cast<const int32_t*>(base + ReadersOffset());
  for (size_t i = 0; i < readers; ++i)
    if (reader_ranks[i] == peer) area.reader_ = area.read_counts_ + i;
  const auto* directory = reinterpret_cast<const int32_t*>(base + OriginsOffset(readers));
  size_t found = kNone;
  for (size_t i = 0; i < slots; ++i)
    if (directory[i] == peer) found = i;
  STARLING_CHECK(found != kNone || area.reader_ != nullptr, Code::kTransport, "rank ", owner,
                 "'s segment for window #", window_id, " has neither a slot nor a read counter for rank ", peer);
  area.Layout(base + SlotsOffset(slots, readers), slots, bytes);
  *slot = found;
  return area;
}

}  // namespace starling::windows
