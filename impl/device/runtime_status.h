// Reading a device runtime that keeps a per-thread "last error" slot, as the CUDA runtime
// does: every failing call (cudaEventQuery's cudaErrorNotReady included) leaves its code
// there, and a kernel launch (<<<>>>) has no status of its own but that slot. Shared by
// the CUDA plugin and the emulated device, which models the slot, so that CI exercises
// the same reading the GPU does.
#pragma once

namespace starling::device {

// The table's event_query answer (0 complete, 1 not yet, 2 error) for a query's status.
// "Not ready" is not a failure, but the runtime recorded it: clear the slot, or the next
// kernel launch on this thread would report it as its own failure.
template <class Err, class ClearSlot>
int EventQueryAnswer(Err err, Err success, Err not_ready, ClearSlot clear_slot) {
  if (err == success) return 0;
  if (err == not_ready) {
    clear_slot();
    return 1;
  }
  return 2;
}

// A launch's status: the slot is cleared first, so that a code an earlier call left
// there is not taken for this launch's; then launch(), then the slot (read and cleared).
template <class LaunchFn, class TakeSlot>
auto LaunchStatus(LaunchFn launch, TakeSlot take_slot) {
  take_slot();
  launch();
  return take_slot();
}

}  // namespace starling::device
