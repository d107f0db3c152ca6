// Emulated events: a record captures "every task queued so far on that stream" (a point in
// the stream's sequence), the way cudaEventRecord captures the stream's current work.
// Queries and waits compare that point with the stream's progress; stream_wait_event
// queues a task that blocks the waiting stream until the point is reached. Waiting on an
// event never recorded is a no-op, as in CUDA.
//
// Stream capture: a stream marked capturing (starling_emu_stream_begin_capture) records
// events as graph nodes; waiting for, querying or synchronizing such an event from
// outside the capture fails and invalidates the capture, which end_capture then reports.
#pragma once

namespace starling::emu {

int EventCreate(int device, void** event);
int EventDestroy(void* event);
int EventRecord(void* event, void* stream);
int EventQuery(void* event);  // 0 complete, 1 not yet, 2 error
int EventSynchronize(void* event);
int StreamWaitEvent(void* stream, void* event);
int StreamIsCapturing(void* stream, int device, int* capturing);
// begin: marks the stream capturing; else ends the capture, failing if it was invalidated.
int SetCapture(const char* fn, void* stream, bool begin);

}  // namespace starling::emu
