// Fuzz target "window": a window request as the target's service receives it (from any
// rank, into a buffer with room to spare). MalformedRequest must accept only requests
// whose payload the service can post as a bounded number of MPI-sized receives, and
// must never read past what arrived.
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "impl/ops/wire.h"
#include "impl/windows/protocol.h"

namespace {
using starling::windows::WindowOp;
using starling::windows::WindowRequest;
}  // namespace

// Input: a 4-byte source rank, then the message.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  int32_t source;
  std::memcpy(&source, data, 4);
  const size_t length = size - 4;
  struct {
    WindowRequest request;
    char spare[64];
  } incoming;
  if (length > sizeof incoming) return 0;  // the receive itself fails: no request at all
  std::memset(&incoming, 0, sizeof incoming);
  std::memcpy(&incoming, data + 4, length);
  const WindowRequest& r = incoming.request;
  if (!starling::windows::MalformedRequest(r, length, source).empty()) return 0;
  // Accepted: it must be exactly a request from its sender, with a postable payload.
  if (length != sizeof(WindowRequest) || r.magic != starling::windows::kWindowMagic || r.sender != source)
    __builtin_trap();
  const bool writes = r.op == WindowOp::kPut || r.op == WindowOp::kAccumulate;
  if (!writes && r.op != WindowOp::kGet && r.op != WindowOp::kMutexAcquire && r.op != WindowOp::kMutexRelease)
    __builtin_trap();
  if (!writes && r.bytes != 0) __builtin_trap();
  if (writes) {
    if (r.chunk == 0 || r.chunk > INT_MAX || r.chunk != starling::ops::WholeMessageChunk(r.bytes)) __builtin_trap();
    if ((r.bytes + r.chunk - 1) / r.chunk > (uint64_t{1} << 16)) __builtin_trap();  // receives posted at once
    if (!std::isfinite(r.weight) || !std::isfinite(r.p)) __builtin_trap();
  }
  return 0;
}
