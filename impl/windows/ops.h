// Window operations as engine operations (create, free, put, accumulate, get, remote
// mutex) and the local ones (update, versions, own mutexes) as plain calls.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "impl/common/tensor.h"
#include "impl/runtime/context.h"
#include "impl/runtime/op.h"
#include "impl/windows/window.h"

namespace starling::windows {

struct TransferArgs {
  std::vector<int> ranks;      // empty: the default set
  std::vector<double> weights; // empty: 1.0 each
  double self_weight = 1.0;
  bool require_mutex = false;
};

enum class Transfer { kPut, kAccumulate, kGet };

std::unique_ptr<runtime::Op> MakeCreate(runtime::Context& context, const TensorView& tensor, std::string name,
                                        bool zero_init);
std::unique_ptr<runtime::Op> MakeFree(runtime::Context& context, std::shared_ptr<Window> window);
// tensor: the data to send (put / accumulate); ignored for get.
std::unique_ptr<runtime::Op> MakeTransfer(runtime::Context& context, std::shared_ptr<Window> window, Transfer kind,
                                          const TensorView* tensor, const TransferArgs& args);
std::unique_ptr<runtime::Op> MakeRemoteMutex(runtime::Context& context, std::shared_ptr<Window> window,
                                             std::vector<int> ranks, bool acquire);

std::shared_ptr<Window> FindWindow(runtime::Context& context, const std::string& name);
std::vector<std::string> WindowNames(runtime::Context& context);
void SetAssociatedP(runtime::Context& context, bool enabled);
bool AssociatedP(runtime::Context& context);
// starling_context_repair: stops answering requests (before the communicators go),
// then reshapes every window over the survivors and serves them again.
void DetachForRepair(runtime::Context& context);
void AttachAfterRepair(runtime::Context& context, const runtime::RepairResult& result);
// Validates `ranks` (each an in-neighbor) for an update / own-mutex call.
void CheckInNeighbors(const Window& window, const std::vector<int>& ranks, const char* what);

}  // namespace starling::windows
