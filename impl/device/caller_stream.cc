#include "impl/device/caller_stream.h"

namespace starling::device {
namespace {
thread_local void* t_stream = nullptr;
}

void* CallerStream() { return t_stream; }
void SetCallerStream(void* stream) { t_stream = stream; }

}  // namespace starling::device
