#include "impl/transport/shm/outbox.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include "impl/common/error.h"
#include "impl/transport/shm/cross_memory.h"

namespace starling::transport::shm {
namespace {

constexpr uint64_t kOutboxMagic = 0x31584F42544F5453ull;  // "STOTBOX1"
constexpr uint32_t kOutboxLayoutVersion = 2;
constexpr size_t kOutboxLine = 128;
constexpr size_t kOutboxMaxCapacity = size_t{1} << 40;
constexpr size_t kMinReserve = size_t{64} << 10;  // reservations grow in powers of two from here

struct OutboxHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t readers;
  uint64_t capacity;
  uint64_t data_offset;
  uint64_t stride;
  // Where the owner's copy of probe_token is in its own address space: a reader that
  // reads the token there through cross-memory attach may pull offers (offers.h).
  uint64_t probe_address;
  uint64_t probe_token;
};

size_t Page() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}
size_t RoundUp(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

// Offsets in the segment's payload: header line, `published` line, one `consumed`
// line per reader, one offer ring per reader, then the two buffers, page-aligned in
// the file.
constexpr size_t kPublishedOffset = kOutboxLine;
constexpr size_t kConsumedOffset = 2 * kOutboxLine;
size_t RingsOffset(uint32_t readers) { return kConsumedOffset + size_t{readers} * sizeof(SharedCounter); }
size_t DataOffset(uint32_t readers) {
  return RoundUp(kSegmentHeaderBytes + RingsOffset(readers) + size_t{readers} * sizeof(OfferRing), Page()) -
         kSegmentHeaderBytes;
}
static_assert(sizeof(SharedCounter) % alignof(OfferRing) == 0, "rings stay aligned after the counters");

}  // namespace

Outbox Outbox::Create(const std::string& name, uint32_t readers, uint32_t expected_peers, size_t capacity,
                      const SegmentOptions& options) {
  STARLING_CHECK_ARG(readers >= 1 && readers <= kMaxReaders, "an outbox has 1 to ", kMaxReaders, " readers, not ",
                     readers);
  STARLING_CHECK_ARG(capacity >= 1 && capacity <= kOutboxMaxCapacity, "outbox capacity ", capacity,
                     " is out of range (1 byte to 1 TiB)");
  const size_t data_offset = DataOffset(readers);
  const size_t stride = RoundUp(capacity, Page());
  Outbox box;
  // Only the counters are reserved now; the buffers as payloads need them.
  box.segment_ = Segment::CreateSparse(name, data_offset + 2 * stride, data_offset, expected_peers, options);
  char* base = static_cast<char*>(box.segment_.payload());
  auto* header = new (base) OutboxHeader{};
  header->magic = kOutboxMagic;
  header->layout_version = kOutboxLayoutVersion;
  header->readers = readers;
  header->capacity = capacity;
  header->data_offset = data_offset;
  header->stride = stride;
  header->probe_token = (uint64_t{NewNonce()} << 32) | NewNonce();
  header->probe_address = reinterpret_cast<uintptr_t>(&header->probe_token);
  new (base + kPublishedOffset) SharedCounter{};
  for (uint32_t r = 0; r < readers; ++r) new (base + kConsumedOffset + r * sizeof(SharedCounter)) SharedCounter{};
  for (uint32_t r = 0; r < readers; ++r) new (base + RingsOffset(readers) + r * sizeof(OfferRing)) OfferRing{};
  // Peers map it only after the owner tells them its name (a collective exchange), which
  // orders these plain writes before their reads.
  box.published_ = reinterpret_cast<SharedCounter*>(base + kPublishedOffset);
  box.consumed_ = reinterpret_cast<SharedCounter*>(base + kConsumedOffset);
  box.rings_ = reinterpret_cast<OfferRing*>(base + RingsOffset(readers));
  box.buffers_ = base + data_offset;
  box.data_offset_ = data_offset;
  box.stride_ = stride;
  box.capacity_ = capacity;
  box.readers_ = readers;
  return box;
}

Outbox Outbox::Open(const std::string& name, const SegmentOptions& options) {
  Outbox box;
  box.segment_ = Segment::Open(name, options);
  const size_t payload = box.segment_.payload_bytes();
  STARLING_CHECK(payload >= kConsumedOffset, Code::kTransport, "shared-memory outbox ", name, " is too small");
  char* base = static_cast<char*>(box.segment_.payload());
  const auto* header = reinterpret_cast<const OutboxHeader*>(base);
  // Copies: another process may change the header while we check it.
  const OutboxHeader h = *header;
  STARLING_CHECK(h.magic == kOutboxMagic && h.layout_version == kOutboxLayoutVersion, Code::kTransport,
                 "shared-memory outbox ", name, " has a corrupted or foreign header");
  STARLING_CHECK(h.readers >= 1 && h.readers <= kMaxReaders && h.capacity >= 1 && h.capacity <= kOutboxMaxCapacity &&
                     h.data_offset == DataOffset(h.readers) && h.stride == RoundUp(h.capacity, Page()) &&
                     h.data_offset + 2 * h.stride <= payload,
                 Code::kTransport, "shared-memory outbox ", name, " has a corrupted header (", h.readers,
                 " readers, capacity ", h.capacity, ", ", payload, " bytes)");
  box.published_ = reinterpret_cast<SharedCounter*>(base + kPublishedOffset);
  box.consumed_ = reinterpret_cast<SharedCounter*>(base + kConsumedOffset);
  box.rings_ = reinterpret_cast<OfferRing*>(base + RingsOffset(h.readers));
  box.buffers_ = base + h.data_offset;
  box.data_offset_ = h.data_offset;
  box.stride_ = h.stride;
  box.capacity_ = h.capacity;
  box.readers_ = h.readers;
  return box;
}

char* Outbox::Begin(size_t bytes, const std::vector<uint32_t>& readers, double give_up_seconds,
                    const WaitPolicy& policy, const std::function<void()>& check) {
  STARLING_CHECK(!writing_, Code::kInternal, "outbox: Begin twice without Publish");
  for (uint32_t r : readers)
    STARLING_CHECK_ARG(r < readers_, "reader ", r, " of an outbox with ", readers_, " readers");
  if (bytes > capacity_) return nullptr;
  const size_t b = (next_ - 1) % 2;
  // The buffer's previous publication must be released by everyone it addressed
  // (acquire: their reads happen before our writes).
  const uint32_t previous = last_[b];
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(give_up_seconds);
  for (uint32_t r : addressed_[b]) {
    const uint32_t c = WaitUntil(
        consumed_[r],
        [&](uint32_t v) { return AtOrAfter(v, previous) || std::chrono::steady_clock::now() >= give_up; }, policy,
        check, "a reader to release a shared-memory buffer");
    if (!AtOrAfter(c, previous)) return nullptr;
  }
  if (bytes > reserved_[b]) {
    // Powers of two from 64 KiB: a few reservations over a run, memory at most 2x the
    // largest payload per buffer. If that much is not to be had, exactly what is needed.
    size_t want = kMinReserve;
    while (want < bytes) want *= 2;
    want = std::min(want, stride_);
    if (!segment_.Reserve(data_offset_ + b * stride_, want)) {
      want = RoundUp(bytes, Page());
      if (!segment_.Reserve(data_offset_ + b * stride_, want)) return nullptr;
    }
    reserved_[b] = want;
  }
  addressed_[b] = readers;
  last_[b] = next_;
  writing_ = true;
  return buffers_ + b * stride_;
}

uint32_t Outbox::Publish() {
  STARLING_CHECK(writing_, Code::kInternal, "outbox: Publish without Begin");
  writing_ = false;
  const uint32_t number = next_++;
  Set(*published_, number);  // release: the buffer's bytes before the number
  return number;
}

const char* Outbox::Read(uint32_t number, uint64_t offset, uint64_t bytes, const WaitPolicy& policy,
                         const std::function<void()>& check) const {
  STARLING_CHECK(offset <= capacity_ && bytes <= capacity_ - offset, Code::kTransport,
                 "a peer announced ", bytes, " bytes at offset ", offset, " of its shared-memory buffer of ",
                 capacity_, " bytes");
  const uint32_t latest =
      WaitUntil(*published_, [number](uint32_t v) { return AtOrAfter(v, number); }, policy, check,
                "a peer's shared-memory publication to become visible");
  // The writer cannot be two publications past one this reader has not released.
  STARLING_CHECK(latest - number <= 1, Code::kTransport, "shared-memory outbox is corrupted: publication ", latest,
                 " is out while this rank still holds publication ", number);
  return buffers_ + ((number - 1) % 2) * stride_ + offset;
}

void Outbox::Release(uint32_t reader, uint32_t number) const {
  STARLING_CHECK_ARG(reader < readers_, "reader ", reader, " of an outbox with ", readers_, " readers");
  SharedCounter& counter = consumed_[reader];
  // Monotonic even if two threads of this process release at once.
  uint32_t current = counter.value.load(std::memory_order_relaxed);
  while (!AtOrAfter(current, number)) {
    if (counter.value.compare_exchange_weak(current, number, std::memory_order_seq_cst)) {
      if (counter.sleepers.load(std::memory_order_seq_cst) != 0) FutexWakeAll(counter.value);
      return;
    }
  }
}

OfferRing& Outbox::ring(uint32_t reader) const {
  STARLING_CHECK_ARG(reader < readers_, "reader ", reader, " of an outbox with ", readers_, " readers");
  return rings_[reader];
}

std::string Outbox::ProbeOwner(uint32_t reader) const {
  const auto* header = static_cast<const OutboxHeader*>(segment_.payload());
  const uint64_t token = header->probe_token;
  uint64_t seen = ~token;
  // The token proves the process read is the owner: in another PID namespace the same
  // number may be another process.
  const int error = ReadProcessMemory(segment_.header().creator_pid, header->probe_address, &seen, sizeof seen);
  if (error != 0) return std::string("process_vm_readv: ") + std::strerror(error);
  if (seen != token) return "the outbox's owner is not the process of that number here (another PID namespace)";
  ring(reader).readable.store(1, std::memory_order_release);
  return "";
}

}  // namespace starling::transport::shm
