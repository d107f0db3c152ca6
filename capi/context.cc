// Contexts and requests: glue only.
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "capi/private/api.h"
#include "capi/private/objects.h"
#include "impl/common/config.h"
#include "impl/common/dtype.h"
#include "impl/device/caller_stream.h"
#include "impl/device/gpu_state.h"
#include "impl/ops/collectives.h"
#include "impl/transport/shm/summaries.h"

namespace starling::capi {

HandleTable<runtime::Context, starling_context_t>& Contexts() {
  static auto* table = new HandleTable<runtime::Context, starling_context_t>("context");
  return *table;
}

HandleTable<RequestEntry, starling_request_t>& Requests() {
  static auto* table = new HandleTable<RequestEntry, starling_request_t>("request");
  return *table;
}

void RunBlocking(runtime::Context& context, std::unique_ptr<runtime::Op> op) {
  std::shared_ptr<runtime::Request> request = context.engine().Execute(std::move(op));
  if (request->code() != Code::kOk) throw Error(request->code(), request->message());
}

void RunNonblocking(const std::shared_ptr<runtime::Context>& context, std::unique_ptr<runtime::Op> op,
                    starling_request_t* out) {
  auto entry = std::make_shared<RequestEntry>();
  entry->context = context;
  entry->request = context->engine().Submit(std::move(op));
  *out = Requests().Add(std::move(entry));
}

namespace {

runtime::ContextOptions ParseOptions(const starling_context_options_t* options) {
  const starling_context_options_t o = CopyOptions(
      options, starling_context_options_t STARLING_CONTEXT_OPTIONS_INIT,
      offsetof(starling_context_options_t, host_comm) + sizeof(int64_t), "options", "STARLING_CONTEXT_OPTIONS_INIT");
  STARLING_CHECK_ARG(o.use_host_comm == 0 || o.use_host_comm == 1, "options->use_host_comm must be 0 or 1, got ",
                     o.use_host_comm);
  runtime::ContextOptions parsed;
  parsed.use_host_comm = o.use_host_comm == 1;
  parsed.host_comm = o.host_comm;
  parsed.nodes_per_machine = o.nodes_per_machine;  // 0 (the default) when an older struct lacks it
  return parsed;
}

template <typename Getter>
starling_status_t Query(starling_context_t ctx, int* out, Getter getter) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = getter(*Contexts().Get(ctx));
  STARLING_API_END();
}

starling_status_t Finished(const runtime::Request& request) {
  if (request.code() == Code::kOk) return STARLING_SUCCESS;
  return SetLastError(request.code(), request.message());
}

// Destroy and abandon: the handle stays valid until the teardown is over, so that another
// thread can still abort the context (destroy runs queued work, which a silent peer could
// block); it is removed afterwards, whatever the teardown did.
template <typename Teardown>
void TearDown(starling_context_t ctx, Teardown teardown) {
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  struct Remove {
    starling_context_t handle;
    ~Remove() {
      try {
        Contexts().Take(handle);
      } catch (...) {
        // Another thread's destroy removed it first.
      }
    }
  } remove{ctx};
  teardown(*context);
}

}  // namespace
}  // namespace starling::capi

using namespace starling;
using namespace starling::capi;

extern "C" {

STARLING_API const char* starling_config_string(void) {
  // The table and the device line are computed once (the plugin is loaded by the first
  // CUDA tensor, never by this call); the contexts' shared-memory lines on each call.
  static const std::string table = DescribeConfig([](const char* name) { return std::getenv(name); }) +
                                   "device plugin: " + device::StatusLine() + "\n";
  // Each distinct text is kept for the life of the process, so every pointer returned
  // stays valid, as it did before the shm lines (texts change only as contexts come and
  // go, so there are few).
  static std::mutex mutex;
  static std::set<std::string> texts;
  std::string text = table + transport::shm::SummaryLines();
  std::lock_guard<std::mutex> lock(mutex);
  return texts.insert(std::move(text)).first->c_str();
}

STARLING_API starling_status_t starling_set_cuda_stream(void* stream) {
  device::SetCallerStream(stream);
  return STARLING_SUCCESS;
}

STARLING_API starling_status_t starling_get_cuda_stream(void** out) {
  STARLING_API_BEGIN();
  *CheckOut(out, "out") = device::CallerStream();
  STARLING_API_END();
}

STARLING_API starling_status_t starling_gpu_path(starling_context_t ctx, const char** out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  static thread_local std::string text;
  text = Contexts().Get(ctx)->Extension<device::GpuState>().PathDescription();
  *out = text.c_str();
  STARLING_API_END();
}

STARLING_API starling_status_t starling_dtype_supported(DLDataType dtype, int* out) {
  STARLING_API_BEGIN();
  *CheckOut(out, "out") = FromDLDataType(dtype).has_value() ? 1 : 0;
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_create(const starling_context_options_t* options,
                                                       starling_context_t* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = nullptr;
  *out = Contexts().Add(runtime::Context::Create(ParseOptions(options)));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_split(starling_context_t ctx, int color, int key,
                                                      const starling_split_options_t* options,
                                                      starling_context_t* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = nullptr;
  const starling_split_options_t o =
      CopyOptions(options, starling_split_options_t STARLING_SPLIT_OPTIONS_INIT,
                  offsetof(starling_split_options_t, nodes_per_machine) + sizeof(int), "options",
                  "STARLING_SPLIT_OPTIONS_INIT");
  STARLING_CHECK_ARG(o.nodes_per_machine >= 0, "options->nodes_per_machine must be >= 0, got ", o.nodes_per_machine);
  std::shared_ptr<runtime::Context> parent = Contexts().Get(ctx);
  MPI_Comm comm = MPI_COMM_NULL;
  RunBlocking(*parent, ops::MakeContextSplit(*parent, color, key, &comm));
  if (comm == MPI_COMM_NULL) return STARLING_SUCCESS;  // STARLING_SPLIT_UNDEFINED
  struct Free {
    MPI_Comm& comm;
    ~Free() { MPI_Comm_free(&comm); }  // the new context holds its own duplicates
  } free_comm{comm};
  runtime::ContextOptions parsed;
  parsed.nodes_per_machine = o.nodes_per_machine;
  parsed.split_comm = comm;
  *out = Contexts().Add(runtime::Context::Create(parsed));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_destroy(starling_context_t ctx) {
  STARLING_API_BEGIN();
  TearDown(ctx, [](runtime::Context& context) { context.Destroy(); });
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_abandon(starling_context_t ctx, const char* reason) {
  STARLING_API_BEGIN();
  TearDown(ctx, [reason](runtime::Context& context) {
    context.Abandon(reason != nullptr && *reason != '\0' ? reason : "abandoned its context");
  });
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_abort(starling_context_t ctx) {
  STARLING_API_BEGIN();
  Contexts().Get(ctx)->Abort();
  STARLING_API_END();
}

STARLING_API starling_status_t starling_rank(starling_context_t ctx, int* out) {
  return Query(ctx, out, [](const runtime::Context& c) { return c.rank(); });
}
STARLING_API starling_status_t starling_size(starling_context_t ctx, int* out) {
  return Query(ctx, out, [](const runtime::Context& c) { return c.size(); });
}
STARLING_API starling_status_t starling_local_rank(starling_context_t ctx, int* out) {
  return Query(ctx, out, [](const runtime::Context& c) { return c.layout().local_rank; });
}
STARLING_API starling_status_t starling_local_size(starling_context_t ctx, int* out) {
  return Query(ctx, out, [](const runtime::Context& c) { return c.layout().local_size; });
}
STARLING_API starling_status_t starling_machine_rank(starling_context_t ctx, int* out) {
  return Query(ctx, out, [](const runtime::Context& c) { return c.layout().machine_rank; });
}
STARLING_API starling_status_t starling_machine_size(starling_context_t ctx, int* out) {
  return Query(ctx, out, [](const runtime::Context& c) { return c.layout().machine_size; });
}
STARLING_API starling_status_t starling_is_homogeneous(starling_context_t ctx, int* out) {
  return Query(ctx, out, [](const runtime::Context& c) { return c.layout().homogeneous ? 1 : 0; });
}

STARLING_API starling_status_t starling_get_stats(starling_context_t ctx, starling_stats_t* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  STARLING_CHECK_ARG(out->struct_size >= sizeof(size_t) + sizeof(uint64_t) && out->struct_size <= (1u << 16),
                     "out->struct_size is ", out->struct_size, "; initialize it with STARLING_STATS_INIT");
  const runtime::Stats& stats = Contexts().Get(ctx)->stats();
  starling_stats_t full = STARLING_STATS_INIT;
  full.operations = stats.operations.load();
  full.fused_operations = stats.fused_operations.load();
  full.fusion_groups = stats.fusion_groups.load();
  const transport::PeerTraffic traffic = Contexts().Get(ctx)->TrafficSums();
  full.messages_sent = traffic.messages_sent;
  full.bytes_sent = traffic.bytes_sent;
  full.messages_received = traffic.messages_received;
  full.bytes_received = traffic.bytes_received;
  full.blocked_ns = stats.blocked_ns.load();
  full.shm_bytes_sent = traffic.shm_bytes_sent;
  full.shm_bytes_received = traffic.shm_bytes_received;
  full.scratch_bytes = stats.scratch_bytes.load();
  full.bytes_before_compression = stats.bytes_before_compression.load();
  full.bytes_after_compression = stats.bytes_after_compression.load();
  device::GpuState& gpu = Contexts().Get(ctx)->Extension<device::GpuState>();
  full.staged_bytes = gpu.staged_bytes.load();
  full.gpu_path = gpu.path() == device::GpuPath::kNccl     ? STARLING_GPU_PATH_NCCL
                  : gpu.path() == device::GpuPath::kStaged ? STARLING_GPU_PATH_STAGED
                                                           : STARLING_GPU_PATH_NONE;
  const size_t size = std::min(out->struct_size, sizeof full);
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t), reinterpret_cast<char*>(&full) + sizeof(size_t),
              size - sizeof(size_t));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_get_peer_stats(starling_context_t ctx, int peer,
                                                       starling_peer_stats_t* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  STARLING_CHECK_ARG(out->struct_size >= sizeof(size_t) + sizeof(uint64_t) && out->struct_size <= (1u << 16),
                     "out->struct_size is ", out->struct_size, "; initialize it with STARLING_PEER_STATS_INIT");
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  std::shared_ptr<const transport::Traffic> traffic = context->traffic();
  const int size = traffic ? traffic->size() : context->size();
  STARLING_CHECK_ARG(peer >= 0 && peer < size, "peer is ", peer, " but the context's ranks are 0 .. ", size - 1);
  const transport::PeerTraffic t = traffic ? traffic->Peer(peer) : transport::PeerTraffic{};
  starling_peer_stats_t full = STARLING_PEER_STATS_INIT;
  full.messages_sent = t.messages_sent;
  full.bytes_sent = t.bytes_sent;
  full.messages_received = t.messages_received;
  full.bytes_received = t.bytes_received;
  full.waits = t.waits;
  full.wait_ns = t.wait_ns;
  full.last_wait_ns = t.last_wait_ns;
  full.probe_latency_ns = t.probe_latency_ns;
  full.probe_bytes_per_second = t.probe_bytes_per_second;
  const size_t bytes = std::min(out->struct_size, sizeof full);
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t), reinterpret_cast<char*>(&full) + sizeof(size_t),
              bytes - sizeof(size_t));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_timeline_enabled(starling_context_t ctx, int* out) {
  STARLING_API_BEGIN();
  *CheckOut(out, "out") = Contexts().Get(ctx)->timeline() ? 1 : 0;
  STARLING_API_END();
}

static runtime::Timeline& TimelineOf(starling_context_t ctx, const char* name) {
  STARLING_CHECK_ARG(name != nullptr, "name must not be NULL");
  runtime::Timeline* timeline = Contexts().Get(ctx)->timeline();
  STARLING_CHECK(timeline != nullptr, Code::kInvalidUsage,
                 "the timeline is off: set STARLING_TIMELINE=<file prefix> before creating the context");
  return *timeline;
}

STARLING_API starling_status_t starling_timeline_start_activity(starling_context_t ctx, const char* name,
                                                                const char* activity) {
  STARLING_API_BEGIN();
  STARLING_CHECK_ARG(activity != nullptr, "activity must not be NULL");
  TimelineOf(ctx, name).Begin(name, activity);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_timeline_end_activity(starling_context_t ctx, const char* name) {
  STARLING_API_BEGIN();
  TimelineOf(ctx, name).End(name);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_request_test(starling_request_t req) {
  STARLING_API_BEGIN();
  std::shared_ptr<RequestEntry> entry = Requests().Get(req);
  if (!entry->request->done()) return STARLING_IN_PROGRESS;
  return Finished(*entry->request);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_request_wait(starling_request_t req) {
  STARLING_API_BEGIN();
  std::shared_ptr<RequestEntry> entry = Requests().Get(req);
  if (!entry->request->MarkWaited()) {
    Fail(Code::kInvalidUsage, "this request was already waited on",
         entry->request->done() ? Str(" (its status was ", static_cast<int>(entry->request->code()), ")") : "",
         "; keep the result of the first wait, or use starling_request_test to poll");
  }
  entry->context->engine().Wait(*entry->request);
  return Finished(*entry->request);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_request_free(starling_request_t req) {
  STARLING_API_BEGIN();
  std::shared_ptr<RequestEntry> entry = Requests().Get(req);
  STARLING_CHECK(entry->request->done(), Code::kInvalidUsage,
                 "the request is still running; wait for it before freeing (its tensors are in use)");
  Requests().Take(req);
  STARLING_API_END();
}

}  // extern "C"
