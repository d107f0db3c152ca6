// Resizing (ULFM): starling_context_grow, starling_context_shrink and starling_joined.
// Glue only.
#include <typeindex>

#include "capi/private/api.h"
#include "capi/private/objects.h"
#include "capi/private/topology_handles.h"
#include "impl/ops/collectives.h"
#include "impl/transport/mpi/spawn.h"
#include "impl/windows/ops.h"
#include "impl/windows/registry.h"

using namespace starling;
using namespace starling::capi;

namespace {

// Names the windows in the way (the core's own check counts them only).
void RefuseWindows(runtime::Context& context, const char* call, const char* verb) {
  const std::vector<std::string> windows = windows::WindowNames(context);
  if (windows.empty()) return;
  std::string names;
  for (const std::string& n : windows) names += (names.empty() ? "'" : ", '") + n + "'";
  Fail(Code::kInvalidUsage, call, ": windows exist (", names, "); free them before the ", verb,
       " and create them again after it");
}

// After a grow or shrink. Other modules' state (stashed neighbor messages, NCCL
// communicators...) was about the old ranks; window ids start again at 1 everywhere, as
// in a process that joined (a window made and freed before a grow gave the members'
// next window another id than the newcomers').
void Renumbered(runtime::Context& context) {
  context.ClearExtensionsExcept(std::type_index(typeid(windows::Registry)));
  context.Extension<windows::Registry>().RestartIds();
}

}  // namespace

extern "C" {

STARLING_API starling_status_t starling_joined(starling_context_t ctx, int* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = Contexts().Get(ctx)->joined() ? 1 : 0;
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_grow(starling_context_t ctx, const starling_grow_options_t* options,
                                                     starling_grow_result_t* out) {
  STARLING_API_BEGIN();
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  const starling_grow_options_t o =
      CopyOptions(options, starling_grow_options_t STARLING_GROW_OPTIONS_INIT,
                  offsetof(starling_grow_options_t, is_weighted) + sizeof(int), "options", "STARLING_GROW_OPTIONS_INIT");
  STARLING_CHECK_ARG(o.is_weighted == 0 || o.is_weighted == 1, "options->is_weighted must be 0 or 1, got ",
                     o.is_weighted);
  STARLING_CHECK_ARG(o.argv == nullptr || o.command != nullptr, "options->argv is set but options->command is NULL");
  starling_grow_result_t r = STARLING_GROW_RESULT_INIT;
  if (out != nullptr) {
    r = CopyOptions(out, r, offsetof(starling_grow_result_t, joined_capacity) + sizeof(int), "out",
                    "STARLING_GROW_RESULT_INIT");
    CheckArray(r.old_to_new, r.old_to_new_capacity, "out->old_to_new", "out->old_to_new_capacity");
    CheckArray(r.joined, r.joined_capacity, "out->joined", "out->joined_capacity");
  }
  RefuseWindows(*context, "starling_context_grow", "grow");
  runtime::GrowOptions parsed;
  parsed.count = o.count;  // checked by the grow, together with every rank's options
  if (o.ranks != nullptr && o.count > 0) parsed.ranks.assign(o.ranks, o.ranks + o.count);
  if (o.command != nullptr) {
    STARLING_CHECK_ARG(o.command[0] != '\0', "options->command is empty");
    parsed.command = o.command;
    for (const char* const* a = o.argv; a != nullptr && *a != nullptr; ++a) parsed.argv.emplace_back(*a);
  } else {
    parsed.command = transport::OwnExecutable();
    parsed.argv = transport::OwnArguments();
  }
  if (o.topology != nullptr) parsed.graph = TopologyFromHandle(o.topology);
  parsed.weighted = o.is_weighted == 1;
  RunBlocking(*context, ops::MakeResizeAgreement(ops::OpKind::kContextGrow, o.count));
  runtime::Context& c = *context;
  const runtime::GrowResult result = c.Grow(parsed, [&c](const runtime::GrowResult&) { Renumbered(c); });
  if (out != nullptr) CopyRenumbering(result, result.joined, r.joined, r.joined_capacity, r, out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_shrink(starling_context_t ctx,
                                                       const starling_shrink_options_t* options,
                                                       starling_shrink_result_t* out) {
  STARLING_API_BEGIN();
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  const starling_shrink_options_t o =
      CopyOptions(options, starling_shrink_options_t STARLING_SHRINK_OPTIONS_INIT,
                  offsetof(starling_shrink_options_t, is_weighted) + sizeof(int), "options",
                  "STARLING_SHRINK_OPTIONS_INIT");
  STARLING_CHECK_ARG(o.is_weighted == 0 || o.is_weighted == 1, "options->is_weighted must be 0 or 1, got ",
                     o.is_weighted);
  starling_shrink_result_t r = STARLING_SHRINK_RESULT_INIT;
  if (out != nullptr) {
    r = CopyOptions(out, r, offsetof(starling_shrink_result_t, left_capacity) + sizeof(int), "out",
                    "STARLING_SHRINK_RESULT_INIT");
    CheckArray(r.old_to_new, r.old_to_new_capacity, "out->old_to_new", "out->old_to_new_capacity");
    CheckArray(r.left, r.left_capacity, "out->left", "out->left_capacity");
  }
  RefuseWindows(*context, "starling_context_shrink", "shrink");
  runtime::ShrinkOptions parsed;
  parsed.count = o.count;  // checked by the shrink, together with every rank's options
  if (o.ranks != nullptr && o.count > 0) parsed.ranks.assign(o.ranks, o.ranks + o.count);
  if (o.topology != nullptr) parsed.graph = TopologyFromHandle(o.topology);
  parsed.weighted = o.is_weighted == 1;
  RunBlocking(*context, ops::MakeResizeAgreement(ops::OpKind::kContextShrink, o.count));
  runtime::Context& c = *context;
  const runtime::ShrinkResult result = c.Shrink(parsed, [&c](const runtime::ShrinkResult&) { Renumbered(c); });
  if (out != nullptr) CopyRenumbering(result, result.left, r.left, r.left_capacity, r, out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_resize(starling_context_t ctx, int new_size, int* left_out) {
  STARLING_API_BEGIN();
  const int size = Contexts().Get(ctx)->size();
  STARLING_CHECK_ARG(new_size >= 1, "new_size must be >= 1, got ", new_size);
  if (left_out != nullptr) *left_out = 0;
  if (new_size < size) {
    starling_shrink_options_t options = STARLING_SHRINK_OPTIONS_INIT;
    options.count = size - new_size;
    starling_shrink_result_t result = STARLING_SHRINK_RESULT_INIT;
    const starling_status_t status = starling_context_shrink(ctx, &options, &result);
    if (status == STARLING_SUCCESS && left_out != nullptr) *left_out = result.new_rank < 0 ? 1 : 0;
    return status;
  }
  if (new_size > size) {
    starling_grow_options_t options = STARLING_GROW_OPTIONS_INIT;
    options.count = new_size - size;
    return starling_context_grow(ctx, &options, nullptr);
  }
  STARLING_API_END();
}

}  // extern "C"
