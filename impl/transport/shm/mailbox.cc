#include "impl/transport/shm/mailbox.h"

#include <cstring>
#include <new>

#include "impl/common/error.h"

namespace starling::transport::shm {
namespace {

constexpr uint64_t kMailboxMagic = 0x31584F424C525453ull;  // "STRLBOX1"
constexpr uint32_t kMailboxLayoutVersion = 1;
constexpr size_t kMailboxLine = 128;
constexpr size_t kMailboxMaxCapacity = size_t{1} << 40;

size_t LineRound(size_t bytes) { return (bytes + kMailboxLine - 1) / kMailboxLine * kMailboxLine; }

// Offsets in the region: header line, version line, one line per reader, buffers.
size_t VersionOffset() { return LineRound(sizeof(MailboxHeader)); }
size_t ConsumedOffset() { return VersionOffset() + sizeof(SharedCounter); }
size_t BuffersOffset(uint32_t readers) { return ConsumedOffset() + size_t{readers} * sizeof(SharedCounter); }

}  // namespace

size_t Mailbox::RegionBytes(uint32_t readers, size_t capacity) {
  STARLING_CHECK_ARG(readers >= 1 && readers <= kMaxReaders, "a mailbox has 1 to ", kMaxReaders,
                     " readers, not ", readers);
  STARLING_CHECK_ARG(capacity >= 1 && capacity <= kMailboxMaxCapacity, "mailbox capacity ", capacity,
                     " is out of range (1 byte to 1 TiB)");
  return BuffersOffset(readers) + 2 * LineRound(capacity);
}

Mailbox Mailbox::Format(void* region, size_t region_bytes, uint32_t readers, size_t capacity) {
  const size_t needed = RegionBytes(readers, capacity);
  STARLING_CHECK_ARG(region != nullptr && reinterpret_cast<uintptr_t>(region) % kMailboxLine == 0,
                     "a mailbox region must be 128-byte aligned");
  STARLING_CHECK_ARG(region_bytes >= needed, "a mailbox for ", readers, " readers of ", capacity, " bytes needs ",
                     needed, " bytes, the region has ", region_bytes);
  unsigned char* base = static_cast<unsigned char*>(region);
  auto* header = new (base) MailboxHeader{};
  header->magic = kMailboxMagic;
  header->layout_version = kMailboxLayoutVersion;
  header->readers = readers;
  header->capacity = capacity;
  header->total_bytes = needed;
  new (base + VersionOffset()) SharedCounter{};
  for (uint32_t r = 0; r < readers; ++r) new (base + ConsumedOffset() + r * sizeof(SharedCounter)) SharedCounter{};
  // Peers attach only after the owner tells them (through MPI, or a counter they
  // acquire): those steps order these plain writes before their reads.
  return Attach(region, region_bytes);
}

Mailbox Mailbox::Attach(void* region, size_t region_bytes) {
  STARLING_CHECK(region != nullptr && reinterpret_cast<uintptr_t>(region) % kMailboxLine == 0 &&
                     region_bytes >= VersionOffset(),
                 Code::kTransport, "shared-memory mailbox region of ", region_bytes, " bytes is too small or misaligned");
  auto* header = static_cast<MailboxHeader*>(region);
  // Copies: another process may change the header while we check it.
  const uint64_t magic = header->magic;
  const uint32_t version = header->layout_version;
  const uint32_t readers = header->readers;
  const uint64_t capacity = header->capacity;
  const uint64_t total = header->total_bytes;
  STARLING_CHECK(magic == kMailboxMagic && version == kMailboxLayoutVersion, Code::kTransport,
                 "shared-memory mailbox has a corrupted or foreign header (magic ", std::hex, magic, ", layout ",
                 std::dec, version, ")");
  STARLING_CHECK(readers >= 1 && readers <= kMaxReaders && capacity >= 1 && capacity <= kMailboxMaxCapacity,
                 Code::kTransport, "shared-memory mailbox header is corrupted (", readers, " readers, capacity ",
                 capacity, ")");
  const size_t needed = BuffersOffset(readers) + 2 * LineRound(capacity);
  STARLING_CHECK(total == needed && needed <= region_bytes, Code::kTransport,
                 "shared-memory mailbox header is corrupted (records ", total, " bytes, its layout needs ", needed,
                 ", the region has ", region_bytes, ")");
  Mailbox box;
  unsigned char* base = static_cast<unsigned char*>(region);
  box.header_ = header;
  box.version_ = reinterpret_cast<SharedCounter*>(base + VersionOffset());
  box.consumed_ = reinterpret_cast<SharedCounter*>(base + ConsumedOffset());
  box.buffers_ = base + BuffersOffset(readers);
  box.stride_ = LineRound(capacity);
  box.capacity_ = capacity;
  box.readers_ = readers;
  return box;
}

uint32_t Mailbox::published() const { return version_->value.load(std::memory_order_acquire); }

void* Mailbox::BeginWrite(const WaitPolicy& policy, const std::function<void()>& check) {
  const uint32_t next = published() + 1;
  // Buffer (next - 1) % 2 last held version next - 2: every reader must have released
  // it. For versions 1 and 2 the wrap-safe comparison with the initial 0 holds at once,
  // and 2^32 versions wrap around without a special case.
  const uint32_t needed = next - 2;
  for (uint32_t r = 0; r < readers_; ++r) {
    WaitUntil(consumed_[r], [needed](uint32_t c) { return AtOrAfter(c, needed); }, policy, check,
              "a reader to release a shared-memory buffer");
  }
  return buffers_ + ((next - 1) % 2) * stride_;
}

void Mailbox::Publish(size_t bytes) {
  STARLING_CHECK_ARG(bytes <= capacity_, "publication of ", bytes, " bytes exceeds the mailbox capacity ", capacity_);
  const uint32_t next = published() + 1;
  header_->sizes[(next - 1) % 2].store(bytes, std::memory_order_relaxed);  // ordered by the Set below
  Set(*version_, next);
}

size_t Mailbox::CheckedSize(uint32_t version) const {
  const uint64_t bytes = header_->sizes[(version - 1) % 2].load(std::memory_order_relaxed);
  STARLING_CHECK(bytes <= capacity_, Code::kTransport, "shared-memory mailbox is corrupted: version ", version,
                 " claims ", bytes, " bytes in a buffer of ", capacity_);
  return static_cast<size_t>(bytes);
}

bool Mailbox::TryRead(uint32_t reader, uint32_t version, const void** data, size_t* bytes) const {
  STARLING_CHECK_ARG(reader < readers_, "reader ", reader, " of a mailbox with ", readers_, " readers");
  const uint32_t latest = published();
  if (!AtOrAfter(latest, version)) return false;
  // The writer cannot get two versions past a reader: it waits for this reader's release.
  STARLING_CHECK(latest - version <= 1, Code::kTransport, "shared-memory mailbox is corrupted: version ", latest,
                 " published while reader ", reader, " has not released version ", version - 1);
  *bytes = CheckedSize(version);
  *data = buffers_ + ((version - 1) % 2) * stride_;
  return true;
}

const void* Mailbox::Read(uint32_t reader, uint32_t version, size_t* bytes, const WaitPolicy& policy,
                          const std::function<void()>& check) const {
  const void* data = nullptr;
  if (TryRead(reader, version, &data, bytes)) return data;
  WaitUntil(*version_, [version](uint32_t v) { return AtOrAfter(v, version); }, policy, check,
            "a peer to publish into shared memory");
  STARLING_CHECK(TryRead(reader, version, &data, bytes), Code::kInternal, "mailbox version vanished");
  return data;
}

void Mailbox::Release(uint32_t reader, uint32_t version) const {
  STARLING_CHECK_ARG(reader < readers_, "reader ", reader, " of a mailbox with ", readers_, " readers");
  Set(consumed_[reader], version);
}

uint32_t Mailbox::consumed(uint32_t reader) const {
  STARLING_CHECK_ARG(reader < readers_, "reader ", reader, " of a mailbox with ", readers_, " readers");
  return consumed_[reader].value.load(std::memory_order_acquire);
}

}  // namespace starling::transport::shm
