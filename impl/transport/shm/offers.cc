#include "impl/transport/shm/offers.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "impl/common/error.h"
#include "impl/transport/shm/cross_memory.h"

namespace starling::transport::shm {
namespace {

enum Phase : uint32_t { kEmpty = 0, kOffered = 1, kClaimed = 2, kDone = 3, kRevoked = 4, kMoved = 5, kWithdrawn = 6 };
constexpr uint32_t kNumberMask = (1u << 29) - 1;

uint32_t Word(uint32_t number, Phase phase) { return ((number & kNumberMask) << 3) | phase; }
uint32_t PhaseOf(uint32_t word) { return word & 7u; }
bool Holds(uint32_t word, uint32_t number) { return (word >> 3) == (number & kNumberMask); }
SharedCounter& SlotOf(OfferRing& ring, uint32_t number) { return ring.slots[number % kOfferSlots]; }

bool Cas(SharedCounter& slot, uint32_t expected, uint32_t desired, uint32_t* seen) {
  uint32_t e = expected;
  const bool ok = slot.value.compare_exchange_strong(e, desired, std::memory_order_seq_cst);
  if (ok && slot.sleepers.load(std::memory_order_seq_cst) != 0) FutexWakeAll(slot.value);
  *seen = ok ? desired : e;
  return ok;
}

}  // namespace

uint32_t OfferSender::Offer(const std::vector<uint32_t>& readers) {
  if (rings_ == nullptr || readers.empty()) return 0;
  Reclaim();
  const uint32_t number = next_;
  for (uint32_t r : readers) {
    STARLING_CHECK_ARG(r < readers_, "reader ", r, " of an outbox with ", readers_, " readers");
    if (rings_[r].readable.load(std::memory_order_acquire) != 1) return 0;
    const uint32_t phase = PhaseOf(SlotOf(rings_[r], number).value.load(std::memory_order_acquire));
    if (phase != kEmpty && phase != kDone && phase != kWithdrawn) return 0;  // a copy still unread
  }
  next_ = (next_ + 1) & kNumberMask;
  if (next_ == 0) next_ = 1;
  for (uint32_t r : readers) Set(SlotOf(rings_[r], number), Word(number, kOffered));
  return number;
}

void OfferSender::Finish(uint32_t number, const std::vector<uint32_t>& readers, double revoke_seconds, size_t bytes,
                         const std::function<void(char*)>& pack, const WaitPolicy& policy,
                         const std::function<void()>& check) {
  const auto revoke_at = std::chrono::steady_clock::now() + std::chrono::duration<double>(revoke_seconds);
  for (uint32_t r : readers) {
    SharedCounter& slot = SlotOf(rings_[r], number);
    const uint32_t done = Word(number, kDone);
    uint32_t word = WaitUntil(
        slot, [&](uint32_t v) { return v != Word(number, kOffered) || std::chrono::steady_clock::now() >= revoke_at; },
        policy, check, "a reader to claim this rank's offered data");
    if (word == Word(number, kOffered) && Cas(slot, word, Word(number, kRevoked), &word)) {
      // Late: it gets a copy, kept until it has read it (Reclaim).
      Moved m{r, number, std::unique_ptr<char[]>(new char[bytes > 0 ? bytes : 1])};
      pack(m.bytes.get());
      rings_[r].moved[number % kOfferSlots].store(reinterpret_cast<uintptr_t>(m.bytes.get()),
                                                  std::memory_order_relaxed);
      Set(slot, Word(number, kMoved));  // release: the address and the copy before the phase
      moved_.push_back(std::move(m));
      continue;
    }
    STARLING_CHECK(word == done || word == Word(number, kClaimed), Code::kTransport,
                   "shared-memory offer slot is corrupted (word ", word, " for offer ", number, ")");
    WaitUntil(
        slot, [done](uint32_t v) { return v == done; }, policy, check, "a reader to read this rank's data");
  }
}

void OfferSender::Withdraw(uint32_t number, const std::vector<uint32_t>& readers, double give_up_seconds) noexcept {
  for (uint32_t r : readers) {
    if (r >= readers_) continue;
    SharedCounter& slot = SlotOf(rings_[r], number);
    uint32_t word = 0;
    if (Cas(slot, Word(number, kOffered), Word(number, kWithdrawn), &word)) continue;
    // Claimed: the reader is in the middle of one kernel copy; give it a bounded time
    // (it may have died there: then the tensor is nobody's concern).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(give_up_seconds);
    while (slot.value.load(std::memory_order_acquire) == Word(number, kClaimed) &&
           std::chrono::steady_clock::now() < give_up)
      std::this_thread::yield();
  }
}

void OfferSender::Reclaim() {
  size_t kept = 0;
  for (Moved& m : moved_) {
    const uint32_t word = SlotOf(rings_[m.reader], m.number).value.load(std::memory_order_acquire);
    if (Holds(word, m.number) && PhaseOf(word) == kMoved) moved_[kept++] = std::move(m);  // not read yet
  }
  moved_.resize(kept);
}

void PullOffer(OfferRing& ring, int32_t pid, uint32_t number, const std::vector<OfferPiece>& pieces,
               const WaitPolicy& policy, const std::function<void()>& check) {
  SharedCounter& slot = SlotOf(ring, number);
  uint32_t word = 0;
  bool moved = false;
  if (!Cas(slot, Word(number, kOffered), Word(number, kClaimed), &word)) {
    STARLING_CHECK(
        Holds(word, number) && (PhaseOf(word) == kRevoked || PhaseOf(word) == kMoved || PhaseOf(word) == kWithdrawn),
        Code::kTransport, "a peer's shared-memory offer slot does not hold offer ", number, " (word ", word, ")");
    word = WaitUntil(
        slot, [number](uint32_t v) { return v != Word(number, kRevoked); }, policy, check,
        "a peer to copy the data this rank reads");
    STARLING_CHECK(word != Word(number, kWithdrawn), Code::kTransport,
                   "a peer withdrew the data it offered (its operation failed)");
    STARLING_CHECK(word == Word(number, kMoved), Code::kTransport,
                   "a peer's shared-memory offer slot is corrupted (word ", word, " for offer ", number, ")");
    moved = true;
  }
  const uint64_t base = moved ? ring.moved[number % kOfferSlots].load(std::memory_order_relaxed) : 0;
  int error = 0;
  for (const OfferPiece& p : pieces) {
    if (p.bytes == 0) continue;
    error = ReadProcessMemory(pid, moved ? base + p.packed : p.address, p.dst, p.bytes);
    if (error != 0) break;
  }
  Set(slot, Word(number, kDone));  // also after a failed read: the writer must not wait for it
  STARLING_CHECK(error != ESRCH, Code::kPeerFailed, "its process (", pid, ") is gone");
  STARLING_CHECK(error == 0, Code::kTransport, "cannot read a peer's offered data (process ", pid,
                 "): ", std::strerror(error));
}

}  // namespace starling::transport::shm
