// Fault tolerance (ULFM): starling_fault_tolerant and starling_context_repair. Glue only.
#include <typeindex>

#include "capi/private/api.h"
#include "capi/private/objects.h"
#include "capi/private/topology_handles.h"
#include "impl/windows/ops.h"
#include "impl/windows/registry.h"

using namespace starling;
using namespace starling::capi;

extern "C" {

STARLING_API starling_status_t starling_fault_tolerant(starling_context_t ctx, int* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = Contexts().Get(ctx)->fault_tolerant() ? 1 : 0;
  STARLING_API_END();
}

STARLING_API starling_status_t starling_context_repair(starling_context_t ctx,
                                                       const starling_repair_options_t* options,
                                                       starling_repair_result_t* out) {
  STARLING_API_BEGIN();
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  const starling_repair_options_t o =
      CopyOptions(options, starling_repair_options_t STARLING_REPAIR_OPTIONS_INIT,
                  offsetof(starling_repair_options_t, is_weighted) + sizeof(int), "options",
                  "STARLING_REPAIR_OPTIONS_INIT");
  STARLING_CHECK_ARG(o.is_weighted == 0 || o.is_weighted == 1, "options->is_weighted must be 0 or 1, got ",
                     o.is_weighted);
  starling_repair_result_t r = STARLING_REPAIR_RESULT_INIT;
  if (out != nullptr) {
    r = CopyOptions(out, r, offsetof(starling_repair_result_t, failed_capacity) + sizeof(int), "out",
                    "STARLING_REPAIR_RESULT_INIT");
    CheckArray(r.old_to_new, r.old_to_new_capacity, "out->old_to_new", "out->old_to_new_capacity");
    CheckArray(r.failed, r.failed_capacity, "out->failed", "out->failed_capacity");
  }
  runtime::RepairOptions parsed;
  if (o.topology != nullptr) parsed.graph = TopologyFromHandle(o.topology);
  parsed.weighted = o.is_weighted == 1;
  runtime::Context& c = *context;
  const runtime::RepairResult result = c.Repair(
      parsed, [&c] { windows::DetachForRepair(c); },
      [&c](const runtime::RepairResult& done) {
        // Other modules' state (stashed neighbor messages, NCCL communicators...) was
        // about the old ranks; the windows are reshaped instead.
        c.ClearExtensionsExcept(std::type_index(typeid(windows::Registry)));
        windows::AttachAfterRepair(c, done);
      });
  if (out != nullptr) {
    CopyRenumbering(result, result.failed, r.failed, r.failed_capacity, r, out);
    out->num_failed = static_cast<int>(result.failed.size());
  }
  STARLING_API_END();
}

}  // extern "C"
