// A publication slot in shared memory: one writer publishes versions 1, 2, 3, ... of a
// payload (32-bit, compared wrap-safe); each of a fixed set of readers reads every version in turn, straight from
// the slot. Double buffered: version v lives in buffer (v - 1) % 2, and the writer
// fills a buffer only once every reader has consumed the version that last used it,
// so neither side ever touches bytes the other is using (plain or SIMD copies are
// race-free; no seqlock retry on large payloads).
//
// Memory ordering: the writer fills the buffer, then Set(version) (a release store);
// a reader's acquire load of the version makes the buffer's bytes visible. A reader's
// Set(consumed) (release) after its last read pairs with the writer's acquire load of
// it before the writer reuses that buffer.
//
// Everything a peer process writes here is checked before use: a corrupted header or
// counter is Error(kTransport), never an out-of-bounds access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "impl/transport/shm/futex.h"

namespace starling::transport::shm {

struct MailboxHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t readers;
  uint64_t capacity;     // bytes per buffer
  uint64_t total_bytes;  // of the whole region
  // Payload bytes of the version in each buffer: written before that version's Set.
  std::atomic<uint64_t> sizes[2];
};

class Mailbox {
 public:
  static constexpr uint32_t kMaxReaders = 4096;

  // Bytes of shared memory a mailbox needs (header, counters, two buffers).
  static size_t RegionBytes(uint32_t readers, size_t capacity);
  // The owner (writer) lays out a mailbox in `region` (zeroed memory, 128-byte aligned).
  static Mailbox Format(void* region, size_t region_bytes, uint32_t readers, size_t capacity);
  // A peer attaches to a mailbox another process formatted; validates the header.
  static Mailbox Attach(void* region, size_t region_bytes);

  uint32_t readers() const { return readers_; }
  size_t capacity() const { return capacity_; }

  // --- the writer ---
  // The last version published (0: none yet).
  uint32_t published() const;
  // Waits until the next version's buffer is free (every reader consumed the version
  // before the last) and returns it, capacity() bytes.
  void* BeginWrite(const WaitPolicy& policy, const std::function<void()>& check);
  // Publishes the next version with `bytes` of payload in the buffer BeginWrite gave.
  void Publish(size_t bytes);

  // --- reader `reader` (0 .. readers()-1) ---
  // Version `version` (the one after the reader's last), or false when the writer has
  // not published it yet. The data stay valid until Release(reader, version).
  bool TryRead(uint32_t reader, uint32_t version, const void** data, size_t* bytes) const;
  // The same, waiting (spin, then futex sleeps) under `policy`.
  const void* Read(uint32_t reader, uint32_t version, size_t* bytes, const WaitPolicy& policy,
                   const std::function<void()>& check) const;
  // The reader is done with `version`: its buffer may be reused.
  void Release(uint32_t reader, uint32_t version) const;
  // The last version `reader` released.
  uint32_t consumed(uint32_t reader) const;

 private:
  MailboxHeader* header_ = nullptr;
  SharedCounter* version_ = nullptr;
  SharedCounter* consumed_ = nullptr;  // one per reader
  unsigned char* buffers_ = nullptr;
  size_t stride_ = 0;  // bytes between the two buffers
  size_t capacity_ = 0;
  uint32_t readers_ = 0;
  // Checks a version a peer published and returns its payload size.
  size_t CheckedSize(uint32_t version) const;
};

}  // namespace starling::transport::shm
