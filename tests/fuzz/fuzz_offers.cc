// Fuzz target "offers": a reader's ring of offer slots in a writer's outbox as a peer
// process could have written it (any bytes), then a reader pulling an offer from it
// and a writer offering, finishing and withdrawing through it. Every corrupted word or
// address must end in an Error (or a failed read into this process's own buffer),
// never an out-of-bounds access or an endless wait.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "impl/common/error.h"
#include "impl/transport/shm/offers.h"

using starling::transport::shm::OfferPiece;
using starling::transport::shm::OfferRing;
using starling::transport::shm::OfferSender;
using starling::transport::shm::PullOffer;
using starling::transport::shm::WaitPolicy;

// Input: one byte choosing the action, four bytes of offer number, two of piece size,
// eight of piece address (0: a valid buffer of this process), then the ring's bytes.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kPrefix = 15;
  if (size < kPrefix) return 0;
  const uint8_t choice = data[0];
  uint32_t number;
  uint16_t bytes;
  uint64_t address;
  std::memcpy(&number, data + 1, 4);
  std::memcpy(&bytes, data + 5, 2);
  std::memcpy(&address, data + 7, 8);
  void* memory = std::aligned_alloc(alignof(OfferRing), sizeof(OfferRing));
  if (memory == nullptr) return 0;
  std::memset(memory, 0, sizeof(OfferRing));
  std::memcpy(memory, data + kPrefix, std::min(size - kPrefix, sizeof(OfferRing)));
  auto* ring = static_cast<OfferRing*>(memory);  // its bytes are the input: no constructor runs
  WaitPolicy policy;
  policy.spin_seconds = 0;
  policy.slice_seconds = 0.0005;
  policy.timeout_seconds = 0.001;  // a wait the input never ends is a timeout, not a hang
  std::vector<char> source(bytes, 'x'), destination(bytes);
  const uint64_t from = address != 0 ? address : reinterpret_cast<uintptr_t>(source.data());
  try {
    switch (choice % 3) {
      case 0:
        PullOffer(*ring, static_cast<int32_t>(getpid()), number,
                  {OfferPiece{from, address & 0xFFFF, bytes, destination.data()}}, policy, nullptr);
        break;
      case 1: {
        OfferSender sender(ring, 1);
        const uint32_t offered = sender.Offer({0});
        auto pack = [&](char* dst) {
          if (bytes > 0) std::memcpy(dst, source.data(), bytes);
        };
        if (offered != 0) sender.Finish(offered, {0}, 0.0, bytes, pack, policy, nullptr);
        break;
      }
      default: {
        OfferSender sender(ring, 1);
        sender.Withdraw(number, {0}, 0.001);
        break;
      }
    }
  } catch (const starling::Error&) {
  }
  std::free(memory);
  return 0;
}
