// Messages of the one-sided window protocol. Requests travel on the window-request
// channel and are received from any source by the target's window service; payloads
// follow on the window-data channel (sender -> target, in order per sender); replies
// (acknowledgements, grants, get data) come back on the window-reply channel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace starling::windows {

enum class WindowOp : uint32_t {
  kPut = 1,
  kAccumulate = 2,
  kGet = 3,
  kMutexAcquire = 4,
  kMutexRelease = 5,
};

constexpr uint32_t kWindowMagic = 0x53544c57;  // "STLW"
constexpr uint32_t kRequestRequireMutex = 1u << 0;
constexpr uint32_t kRequestHasP = 1u << 1;

struct WindowRequest {
  uint32_t magic = kWindowMagic;
  WindowOp op = WindowOp::kPut;
  uint32_t window_id = 0;
  int32_t sender = -1;
  uint64_t bytes = 0;   // payload that follows (put, accumulate)
  uint32_t chunk = 0;   // chunk size of that payload
  uint32_t flags = 0;
  double weight = 1.0;  // scales the payload where it lands
  double p = 0.0;       // associated p (already multiplied by weight)
};

struct WindowReply {
  uint32_t magic = kWindowMagic;
  int32_t code = 0;     // 0 or a negative starling::Code
  uint64_t bytes = 0;   // get: payload that follows
  uint32_t chunk = 0;
  uint32_t reserved = 0;
  char message[232] = {};  // error text, NUL-terminated
};

// Why a request that arrived as `bytes` bytes from rank `source` is malformed, or ""
// when it is well formed. Only the checks that need no window: a corrupted or
// truncated request must become an error reply, never a crash or a wild write.
std::string MalformedRequest(const WindowRequest& request, size_t bytes, int source);

}  // namespace starling::windows
