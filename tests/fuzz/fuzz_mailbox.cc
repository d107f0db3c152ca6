// Fuzz target "mailbox": a shared-memory mailbox region as a peer process could have
// written it (any bytes). Attach must refuse what it cannot lay out, and reads and
// writes through an accepted mailbox must stay inside the region: a corrupted header
// or counter is an Error, never an out-of-bounds access.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "impl/common/error.h"
#include "impl/transport/shm/mailbox.h"

using starling::transport::shm::Mailbox;
using starling::transport::shm::WaitPolicy;

// Input: one byte choosing the reader, then the region.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  const uint8_t choice = data[0];
  const size_t bytes = size - 1;
  // Exactly `bytes` of 128-byte aligned memory: ASan sees any access past the region.
  void* region = std::aligned_alloc(128, (bytes + 127) / 128 * 128 + 128);
  if (region == nullptr) return 0;
  std::memcpy(region, data + 1, bytes);
  try {
    Mailbox box = Mailbox::Attach(region, bytes);
    const uint32_t reader = choice % box.readers();
    volatile unsigned char sink = 0;
    for (uint32_t version : {1u, 2u, box.published(), box.published() + 1u}) {
      const void* payload = nullptr;
      size_t n = 0;
      try {
        if (box.TryRead(reader, version, &payload, &n)) {
          for (size_t i = 0; i < n; ++i) sink = sink ^ static_cast<const unsigned char*>(payload)[i];
          box.Release(reader, version);
        }
      } catch (const starling::Error&) {
      }
    }
    WaitPolicy policy;
    policy.spin_seconds = 0;
    policy.timeout_seconds = 1e-4;  // readers that never release: a timeout, not a hang
    try {
      void* buffer = box.BeginWrite(policy, nullptr);
      std::memset(buffer, 0x5A, box.capacity());
      box.Publish(box.capacity());
    } catch (const starling::Error&) {
    }
  } catch (const starling::Error&) {
  }
  std::free(region);
  return 0;
}
