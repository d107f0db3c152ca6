// Context::Repair: the survivors of a failure make a smaller context of themselves
// (ULFM: revoke, shrink, agree). See starling_context_repair in starling.h.
#include <algorithm>

#include "impl/common/logging.h"
#include "impl/runtime/context.h"
#include "impl/transport/mpi/ulfm.h"

namespace starling::runtime {

RepairResult Context::Repair(const RepairOptions& options, const std::function<void()>& detach,
                             const std::function<void(const RepairResult&)>& attach) {
  std::lock_guard<std::mutex> destroy_lock(destroy_mutex_);
  STARLING_CHECK(!destroyed_, Code::kInvalidHandle, "the context was destroyed");
  STARLING_CHECK(!aborted(), Code::kAborted, "the context was aborted (starling_context_abort); destroy it");
  STARLING_CHECK(fault_tolerant(), Code::kUnsupported, "starling_context_repair: ", transport::UlfmMissing());
  if (options.graph) {
    STARLING_CHECK_ARG(options.graph->size() >= 1, "the repair topology is empty");
  }
  // Stop: running waits end (they see the context failed), nothing new starts on this
  // rank, and, if this rank knows of a failure, the other survivors leave their waits
  // (revoked communicators). A rank that knows of none does not revoke: in a repair
  // without a failure its peers may still be finishing the last collective, and the
  // shrink below waits for them.
  MarkBroken("the context is being repaired (starling_context_repair)", Code::kPeerFailed,
             /*revoke=*/peer_failed_.load(std::memory_order_acquire));
  std::unique_lock<std::mutex> exec = engine_->Quiesce();
  if (detach) detach();
  SetBackgroundService(nullptr, nullptr);  // detach stopped the window service

  // Shrink and renumber. A rank failing from here on makes every survivor's repair fail
  // with kPeerFailed (the agreement below is uniform); the old communicators stay, so
  // repair can be called again and shrinks them anew.
  RepairResult result;
  result.old_rank = rank_;
  result.old_size = size_;
  std::unique_ptr<transport::MpiTransport> fresh;
  transport::Layout layout;
  std::shared_ptr<TopologyState> topology;
  try {
    MPI_Comm shrunk = transport_->Shrink();
    // One agreement on `shrunk` before using it, on whether every survivor's topology has
    // the survivors' size:
    // - every survivor has then finished creating `shrunk` (a survivor whose duplication
    //   below failed revoked it while a slower one was still inside the shrink: Open MPI
    //   5.0.11 crashed in ompi_comm_revoke_local, 3 of 46 runs of fault.multihost.2x2
    //   under load);
    // - a death the shrink did not know of (two ranks of a host killed together) fails
    //   every survivor here alike, and a wrong size refuses on every survivor alike, with
    //   nobody left inside a collective on it: nothing to revoke.
    int survivors = 0;
    MPI_Comm_size(shrunk, &survivors);
    const bool sized = !options.graph || options.graph->size() == survivors;
    int all_sized = sized ? 1 : 0;
    const int agreed_code = transport::AgreeOnCommunicator(&shrunk, &all_sized);
    if (agreed_code != MPI_SUCCESS || !all_sized) MPI_Comm_free(&shrunk);
    if (agreed_code != MPI_SUCCESS) {
      int error_class = MPI_ERR_OTHER;
      MPI_Error_class(agreed_code, &error_class);
      STARLING_CHECK(!transport::IsFailureClass(error_class), Code::kPeerFailed,
                     "a rank failed during starling_context_repair; call it again (the survivors repair together)");
      Fail(Code::kTransport, "starling_context_repair: MPIX_Comm_agree failed (MPI error class ", error_class,
           ")");
    }
    STARLING_CHECK_ARG(sized, "the repair topology has ", options.graph->size(), " ranks but ", survivors,
                       " survived");
    STARLING_CHECK_ARG(all_sized, "another survivor passed a repair topology whose size is not the number of "
                       "survivors (", survivors, "); pass the same topology on every survivor");
    try {
      fresh = std::make_unique<transport::MpiTransport>(shrunk);
    } catch (const Error& e) {
      // A rank that died after the agreement makes duplicating `shrunk` fail with
      // MPI_ERR_OTHER (its collective saw MPIX_ERR_PROC_FAILED). Survivors still inside
      // the duplication leave it (revoked; every survivor finished the shrink before the
      // agreement); a repair called again shrinks without the dead rank.
      transport::RevokeCommunicator(&shrunk);
      MPI_Comm_free(&shrunk);
      STARLING_CHECK(e.code() != Code::kTransport, Code::kPeerFailed,
                     "a rank failed during starling_context_repair (", e.what(),
                     "); call it again (the survivors repair together)");
      throw;
    }
    MPI_Comm_free(&shrunk);
    const std::vector<int> old_ranks = fresh->AllgatherInt(rank_);
    result.new_rank = fresh->rank();
    result.new_size = fresh->size();
    result.old_to_new.assign(static_cast<size_t>(size_), -1);
    for (int n = 0; n < result.new_size; ++n) {
      const int old = old_ranks[static_cast<size_t>(n)];
      STARLING_CHECK(old >= 0 && old < size_ && result.old_to_new[static_cast<size_t>(old)] < 0, Code::kInternal,
                     "repair: survivors reported inconsistent ranks");
      result.old_to_new[static_cast<size_t>(old)] = n;
    }
    for (int r = 0; r < size_; ++r)
      if (result.old_to_new[static_cast<size_t>(r)] < 0) result.failed.push_back(r);
    layout = fresh->ComputeLayout(nodes_per_machine_);
    topology = TopologyAfter(options.graph, options.weighted, result.old_to_new, result.new_size, &result.topology);
    // Every survivor got here: only then is the new context in use anywhere.
    bool failed = false;
    const int agreed = fresh->Agree(1, &failed);
    STARLING_CHECK(!failed && agreed == 1, Code::kPeerFailed,
                   "a rank failed during starling_context_repair; call it again (the survivors repair together)");
  } catch (...) {
    // The context stays failed on its old communicators (calls fail fast; the modules
    // stay detached until a repair succeeds); survivors still inside `fresh` leave it.
    if (fresh) fresh->Revoke();
    throw;
  }

  Renumber(std::move(fresh), std::move(layout), std::move(topology), "starling_context_repair");
  repaired_ = true;
  if (attach) attach(result);
  STARLING_LOG_INFO("context repaired: ", result.old_size, " -> ", result.new_size, " ranks (this rank ",
                    result.old_rank, " -> ", result.new_rank, "), topology: ", result.topology);
  return result;
}

}  // namespace starling::runtime
