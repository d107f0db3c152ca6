// Fuzz target "window_slots": a window's shared slot area as a peer process could have
// written it (any bytes). View must refuse what it cannot lay out, and a put or an
// accumulate through an accepted slot (what an origin does) must stay inside the
// region, and so must a get's lock and read counter: a corrupted header, directory or
// buffer index is an Error, never an out-of-bounds access.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "impl/common/error.h"
#include "impl/windows/slots.h"

using starling::windows::Slot;
using starling::windows::SlotArea;

// Input: the window id (1 byte), origin (1 byte), tensor bytes (2 bytes), then the region.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4 || size > (1u << 20)) return 0;
  const uint32_t window_id = data[0];
  const int origin = data[1];
  const size_t tensor_bytes = static_cast<size_t>(data[2]) | (static_cast<size_t>(data[3]) << 8);
  const size_t bytes = size - 4;
  // Exactly `bytes` of 128-byte aligned memory: ASan sees any access past the region.
  void* region = std::aligned_alloc(128, (bytes + 127) / 128 * 128 + 128);
  if (region == nullptr) return 0;
  std::memcpy(region, data + 4, bytes);
  try {
    size_t index = 0;
    SlotArea area = SlotArea::View(region, bytes, window_id, /*owner=*/0, origin, tensor_bytes, &index);
    // A get takes the tensor lock and counts what it read.
    if (area.tensor_state()->lock.TryLock()) area.tensor_state()->lock.Unlock();
    if (area.reader()) area.reader()->fetch_add(tensor_bytes);
    if (index != SlotArea::kNone) {
      const Slot slot = area.slot(index);
      std::memset(slot.other(), 0x5A, tensor_bytes);  // a put
      volatile unsigned char sink = 0;
      const char* value = slot.value();  // an accumulate reads and writes the value
      for (size_t i = 0; i < tensor_bytes; ++i) sink = sink ^ static_cast<unsigned char>(value[i]);
      slot.state->version += 1;
      slot.state->p += 1.0;
    }
  } catch (const starling::Error&) {
  }
  std::free(region);
  return 0;
}
