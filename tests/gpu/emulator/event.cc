#include "event.h"

#include <map>
#include <memory>
#include <mutex>

#include "common.h"
#include "impl/device/runtime_status.h"
#include "stream.h"

namespace starling::emu {

namespace {

struct Event {
  explicit Event(int d) : device(d) {}
  const int device;
  // The last record: the stream's progress and the point captured. Guarded by mu.
  std::mutex mu;
  std::shared_ptr<StreamState> stream;  // null until recorded
  uint64_t point = 0;
  bool captured = false;  // recorded on a capturing stream: a node of the graph, not a point
};

struct EventRegistry {
  std::mutex mu;
  std::map<void*, std::shared_ptr<Event>> events;
};

EventRegistry& Events() {
  static EventRegistry* registry = new EventRegistry;  // never destroyed, like the streams'
  return *registry;
}

std::shared_ptr<Event> Resolve(const char* fn, void* handle) {
  EventRegistry& reg = Events();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.events.find(handle);
  if (it == reg.events.end()) {
    Fail("%s: %p is not a live emulated event", fn, handle);
    return nullptr;
  }
  UseDevice(it->second->device);
  return it->second;
}

// The last record of e, or a null state if never recorded. An event recorded during a
// capture cannot be waited for from outside it: as CUDA does (cudaErrorCapturedEvent,
// or the waiting stream joining the capture), the use fails and invalidates the capture.
std::shared_ptr<StreamState> LastRecord(const char* fn, Event& e, uint64_t* point, bool* failed) {
  std::lock_guard<std::mutex> lock(e.mu);
  *point = e.point;
  *failed = false;
  if (e.captured) {
    e.stream->capture = StreamState::kInvalidated;
    Fail("%s: the event was recorded on stream %p while it was being captured into a CUDA graph "
         "(cudaErrorCapturedEvent); the capture is invalidated", fn, e.stream->handle());
    *failed = true;
  }
  return e.stream;
}

}  // namespace

int EventCreate(int device, void** handle) {
  if (handle == nullptr) return Fail("event_create: event is NULL");
  if (!ValidDevice(device)) return Fail("event_create: invalid device %d", device);
  UseDevice(device);
  auto e = std::make_shared<Event>(device);
  EventRegistry& reg = Events();
  std::lock_guard<std::mutex> lock(reg.mu);
  *handle = e.get();
  reg.events.emplace(*handle, std::move(e));
  return 0;
}

int EventDestroy(void* handle) {
  EventRegistry& reg = Events();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (reg.events.erase(handle) == 0) return Fail("event_destroy: %p is not a live emulated event", handle);
  return 0;
}

int EventRecord(void* handle, void* stream_handle) {
  auto e = Resolve("event_record", handle);
  if (!e) return 1;
  // NULL: the legacy stream of the event's device (plugin_abi.h), whatever device the
  // calling thread has current.
  auto stream = ResolveStream("event_record", stream_handle, e->device);
  if (!stream) return 1;
  if (stream->device() != e->device)
    return Fail("event_record: event of device %d recorded on a stream of device %d", e->device, stream->device());
  uint64_t point;
  if (stream->Point("event_record", &point) != 0) return 1;
  std::lock_guard<std::mutex> lock(e->mu);
  e->stream = stream->state();
  e->point = point;
  e->captured = stream->state()->capture.load() != StreamState::kNotCapturing;
  return 0;
}

int EventQuery(void* handle) {
  auto e = Resolve("event_query", handle);
  if (!e) return 2;
  uint64_t point;
  bool failed;
  auto state = LastRecord("event_query", *e, &point, &failed);
  if (failed) return 2;
  if (!state) return 0;  // never recorded: complete, as cudaEventQuery says
  std::string error;
  const bool reached = state->Reached(point, &error);
  if (!error.empty()) {
    Fail("event_query: the event's stream %p failed: %s", state->handle(), error.c_str());
    return 2;
  }
  // cudaEventQuery records cudaErrorNotReady in the thread's last-error slot; the answer
  // is read the way the CUDA plugin reads it (runtime_status.h).
  if (!reached) SetRuntimeError(kRtNotReady);
  return starling::device::EventQueryAnswer(int{reached ? kRtSuccess : kRtNotReady}, int{kRtSuccess}, int{kRtNotReady},
                                            [] { TakeRuntimeError(); });
}

int EventSynchronize(void* handle) {
  auto e = Resolve("event_synchronize", handle);
  if (!e) return 1;
  uint64_t point;
  bool failed;
  auto state = LastRecord("event_synchronize", *e, &point, &failed);
  if (failed) return 1;
  if (!state) return 0;
  const std::string error = state->WaitFor(point);
  if (!error.empty()) return Fail("event_synchronize: the event's stream %p failed: %s", state->handle(), error.c_str());
  return 0;
}

int StreamWaitEvent(void* stream_handle, void* handle) {
  auto stream = ResolveStream("stream_wait_event", stream_handle);
  if (!stream) return 1;
  auto e = Resolve("stream_wait_event", handle);
  if (!e) return 1;
  uint64_t point;
  bool failed;
  auto state = LastRecord("stream_wait_event", *e, &point, &failed);
  if (failed) return 1;
  if (!state) {
    uint64_t ignored;  // still report a failed stream, like any call on it
    return stream->Point("stream_wait_event", &ignored);
  }
  // Captured now: a later record of the same event does not move this wait (CUDA's rule).
  return stream->Submit("stream_wait_event", [state, point]() -> std::string {
    const std::string error = state->WaitFor(point);
    if (!error.empty()) return Format("waited for an event of stream %p, which failed: %s", state->handle(), error.c_str());
    return "";
  });
}

int StreamIsCapturing(void* stream_handle, int device, int* capturing) {
  if (capturing == nullptr) return Fail("stream_is_capturing: capturing is NULL");
  if (!ValidDevice(device)) return Fail("stream_is_capturing: invalid device %d", device);
  auto stream = ResolveStream("stream_is_capturing", stream_handle, device);
  if (!stream) return 1;
  *capturing = stream->state()->capture.load() != StreamState::kNotCapturing;
  return 0;
}

int SetCapture(const char* fn, void* stream_handle, bool begin) {
  if (stream_handle == nullptr) return Fail("%s: the legacy stream cannot be captured", fn);
  auto stream = ResolveStream(fn, stream_handle);
  if (!stream) return 1;
  std::atomic<int>& capture = stream->state()->capture;
  if (begin) {
    int expected = StreamState::kNotCapturing;
    if (!capture.compare_exchange_strong(expected, StreamState::kCapturing))
      return Fail("%s: stream %p is capturing already", fn, stream_handle);
    return 0;
  }
  const int was = capture.exchange(StreamState::kNotCapturing);
  if (was == StreamState::kNotCapturing) return Fail("%s: stream %p is not capturing", fn, stream_handle);
  if (was == StreamState::kInvalidated)
    return Fail("%s: the capture of stream %p was invalidated (cudaErrorStreamCaptureInvalidated)", fn, stream_handle);
  return 0;
}

}  // namespace starling::emu
