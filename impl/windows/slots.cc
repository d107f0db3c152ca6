#include "impl/windows/slots.h"

#include <cstring>
#include <new>

#include "impl/common/error.h"

namespace starling::windows {
namespace {

constexpr uint64_t kSlotsMagic = 0x31534C5357545453ull;  // "STTWSLS1"
constexpr uint32_t kSlotsLayoutVersion = 2;
constexpr size_t kSlotsLine = 128;
constexpr uint32_t kMaxSlots = 1u << 16;

size_t RoundUp(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

// The first line of a shared area; the origins' ranks follow (the directory), then the
// slots.
struct SlotsHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t window_id;
  int32_t owner;
  uint32_t slots;
  uint64_t tensor_bytes;
};
static_assert(sizeof(SlotsHeader) <= kSlotsLine, "the header fits its line");

size_t DirectoryBytes(size_t slots) { return RoundUp(slots * sizeof(int32_t), kSlotsLine); }
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

SlotArea SlotArea::Share(const std::string& name, uint32_t window_id, int owner, const std::vector<int>& origins,
                         size_t bytes, const void* initial, const transport::shm::SegmentOptions& options) {
  STARLING_CHECK_ARG(!origins.empty() && origins.size() <= kMaxSlots, "a shared window area has 1 to ", kMaxSlots,
                     " slots, not ", origins.size());
  const size_t slots = origins.size();
  const size_t total = kSlotsLine + DirectoryBytes(slots) + slots * SlotStride(bytes);
  SlotArea area;
  area.segment_ = std::make_shared<transport::shm::Segment>(
      transport::shm::Segment::Create(name, total, static_cast<uint32_t>(slots), options));
  char* base = static_cast<char*>(area.segment_->payload());
  auto* directory = reinterpret_cast<int32_t*>(base + kSlotsLine);
  for (size_t i = 0; i < slots; ++i) directory[i] = origins[i];
  area.Layout(base + kSlotsLine + DirectoryBytes(slots), slots, bytes);
  for (size_t i = 0; i < slots; ++i) {
    Slot s = area.slot(i);
    new (s.state) SlotState();
    Fill(s, bytes, initial);
  }
  // The header last, with a release store of its magic: an origin that maps the
  // segment after the creation's agreement sees everything above.
  auto* header = new (base) SlotsHeader{};
  header->layout_version = kSlotsLayoutVersion;
  header->window_id = window_id;
  header->owner = owner;
  header->slots = static_cast<uint32_t>(slots);
  header->tensor_bytes = bytes;
  reinterpret_cast<std::atomic<uint64_t>*>(&header->magic)->store(kSlotsMagic, std::memory_order_release);
  return area;
}

SlotArea SlotArea::Attach(const std::string& name, uint32_t window_id, int owner, int origin, size_t bytes,
                          size_t* slot, const transport::shm::SegmentOptions& options) {
  auto segment = std::make_shared<transport::shm::Segment>(transport::shm::Segment::Open(name, options));
  SlotArea area = View(segment->payload(), segment->payload_bytes(), window_id, owner, origin, bytes, slot);
  area.segment_ = std::move(segment);
  return area;
}

SlotArea SlotArea::View(void* region, size_t have, uint32_t window_id, int owner, int origin, size_t bytes,
                        size_t* slot) {
  char* base = static_cast<char*>(region);
  STARLING_CHECK(have >= kSlotsLine, Code::kTransport, "window segment is too small (", have, " bytes)");
  const auto* header = reinterpret_cast<const SlotsHeader*>(base);
  const uint64_t magic =
      reinterpret_cast<const std::atomic<uint64_t>*>(&header->magic)->load(std::memory_order_acquire);
  STARLING_CHECK(magic == kSlotsMagic && header->layout_version == kSlotsLayoutVersion, Code::kTransport,
                 "not a window's segment (magic ", magic, ", layout ", header->layout_version, ")");
  STARLING_CHECK(header->window_id == window_id && header->owner == owner && header->tensor_bytes == bytes &&
                     header->slots >= 1 && header->slots <= kMaxSlots,
                 Code::kTransport, "the segment holds window #", header->window_id, " of rank ", header->owner, " (",
                 header->tensor_bytes, " bytes, ", header->slots, " slots), not window #", window_id, " of rank ",
                 owner, " (", bytes, " bytes)");
  const size_t slots = header->slots;
  STARLING_CHECK(bytes <= have && have >= kSlotsLine + DirectoryBytes(slots) + slots * SlotStride(bytes),
                 Code::kTransport, "the window segment is too small for its ", slots, " slots (", have, " bytes)");
  const auto* directory = reinterpret_cast<const int32_t*>(base + kSlotsLine);
  size_t found = slots;
  for (size_t i = 0; i < slots; ++i)
    if (directory[i] == origin) found = i;
  STARLING_CHECK(found < slots, Code::kTransport, "rank ", owner, "'s segment for window #", window_id,
                 " has no slot for rank ", origin);
  SlotArea area;
  area.Layout(base + kSlotsLine + DirectoryBytes(slots), slots, bytes);
  *slot = found;
  return area;
}

}  // namespace starling::windows
