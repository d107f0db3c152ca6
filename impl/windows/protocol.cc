#include "impl/windows/protocol.h"

#include <cmath>

#include "impl/common/error.h"
#include "impl/ops/wire.h"

namespace starling::windows {
namespace {
// Larger than any window a rank can hold; bounds what a corrupted header can ask for.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 46;
}  // namespace

std::string MalformedRequest(const WindowRequest& r, size_t bytes, int source) {
  if (bytes != sizeof(WindowRequest)) return Str("a ", bytes, "-byte window request (expected ", sizeof r, ")");
  if (r.magic != kWindowMagic) return "a window request without the Starling magic number";
  if (r.sender != source) return Str("a window request claiming to come from rank ", r.sender);
  const bool writes = r.op == WindowOp::kPut || r.op == WindowOp::kAccumulate;
  if (!writes && r.op != WindowOp::kGet && r.op != WindowOp::kMutexAcquire && r.op != WindowOp::kMutexRelease)
    return Str("unknown window operation ", static_cast<uint32_t>(r.op));
  if (!writes) return r.bytes == 0 ? std::string() : Str("a payload of ", r.bytes, " bytes on a request without one");
  if (r.bytes > kMaxPayloadBytes) return Str("a payload of ", r.bytes, " bytes");
  if (r.chunk != ops::WholeMessageChunk(r.bytes))
    return Str("a payload of ", r.bytes, " bytes in chunks of ", r.chunk);
  if (!std::isfinite(r.weight) || !std::isfinite(r.p)) return "a non-finite weight or p";
  return std::string();
}

}  // namespace starling::windows
