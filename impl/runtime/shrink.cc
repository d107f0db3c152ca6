// Context::Shrink: chosen ranks leave a running context on purpose (resize on demand),
// the others go on renumbered. See starling_context_shrink in starling.h.
#include <algorithm>
#include <set>

#include "impl/common/bytes.h"
#include "impl/common/logging.h"
#include "impl/runtime/context.h"

namespace starling::runtime {

ShrinkResult Context::Shrink(const ShrinkOptions& options, const std::function<void(const ShrinkResult&)>& attach) {
  ShrinkResult result;
  {
    std::lock_guard<std::mutex> destroy_lock(destroy_mutex_);
    CheckResizable("starling_context_shrink", "shrink");
    // Runs what was submitted before, then holds the execution lock: nothing else runs.
    std::unique_lock<std::mutex> exec = engine_->Drain();
    result.old_rank = rank_;
    result.old_size = size_;

    // Local checks, then one agreement on the options (no rank goes on alone).
    std::string problem;
    std::set<int> leaving;
    if (options.count < 1 || options.count >= size_) {
      problem = Str("options->count must be in [1, ", size_ - 1, "] (at least one rank stays), got ", options.count);
    } else if (options.ranks.empty()) {
      for (int r = size_ - options.count; r < size_; ++r) leaving.insert(r);
    } else {
      for (int r : options.ranks) {
        if (r < 0 || r >= size_) problem = Str("options->ranks: ", r, " is not in [0, ", size_, ")");
        else if (!leaving.insert(r).second) problem = Str("options->ranks: ", r, " is given twice");
      }
    }
    result.new_size = size_ - static_cast<int>(leaving.size());
    for (int r = 0, next = 0; r < size_; ++r) result.old_to_new.push_back(leaving.count(r) ? -1 : next++);
    result.left.assign(leaving.begin(), leaving.end());
    std::shared_ptr<TopologyState> topology;
    if (problem.empty()) {
      topology = TopologyAfter(options.graph, options.weighted, result.old_to_new, result.new_size, &result.topology);
      if (topology->graph->size() != result.new_size)
        problem = Str("the topology has ", topology->graph->size(), " ranks but ", result.new_size, " stay");
    }
    std::vector<char> agreed;
    PutBytes<int32_t>(&agreed, static_cast<int32_t>(result.left.size()));
    for (int r : result.left) PutBytes<int32_t>(&agreed, r);
    if (problem.empty()) {
      PutBytes<int32_t>(&agreed, topology->weighted ? 1 : 0);
      topology->graph->AppendTo(&agreed);
    }
    AgreeOnOptions("starling_context_shrink", problem, agreed, "count, ranks, topology and is_weighted");
    result.new_rank = result.old_to_new[static_cast<size_t>(rank_)];

    // The ranks that stay make their communicators; then all, those that leave too, agree
    // that it worked, so that a failure leaves the context unchanged on every rank.
    std::unique_ptr<transport::MpiTransport> fresh;
    transport::Layout layout;
    try {
      MPI_Comm stay = transport_->Split(result.new_rank >= 0 ? 0 : -1, result.new_rank);
      if (stay != MPI_COMM_NULL) {
        try {
          fresh = std::make_unique<transport::MpiTransport>(stay);
        } catch (...) {
          MPI_Comm_free(&stay);
          throw;
        }
        MPI_Comm_free(&stay);
        STARLING_CHECK(fresh->rank() == result.new_rank && fresh->size() == result.new_size, Code::kInternal,
                       "starling_context_shrink: rank ", fresh->rank(), " of ", fresh->size(), ", expected ",
                       result.new_rank, " of ", result.new_size);
        layout = fresh->ComputeLayout(nodes_per_machine_);
      }
      bool failed = false;
      const int agreed_ok = transport_->Agree(1, &failed);
      STARLING_CHECK(!failed && agreed_ok == 1, Code::kPeerFailed,
                     "a rank failed during starling_context_shrink; the context is unchanged (repair it)");
    } catch (...) {
      if (fresh) fresh->Revoke();
      throw;
    }

    if (fresh) {
      Renumber(std::move(fresh), std::move(layout), std::move(topology), "starling_context_shrink");
      shrunk_ = true;
      // The ranks that left exit without MPI_Finalize (it would wait for every process
      // of the job), so this process must not finalize either: it would wait for them.
      transport::MpiLifetime::NoteFailure();
      if (attach) attach(result);
      STARLING_LOG_INFO("context shrunk: ", result.old_size, " -> ", result.new_size, " ranks (this rank ",
                        result.old_rank, " -> ", result.new_rank, "), topology: ", result.topology);
      return result;
    }
    left_.store(true, std::memory_order_release);
    STARLING_LOG_INFO("left the context (starling_context_shrink): ", result.old_size, " -> ", result.new_size,
                      " ranks; this rank was ", result.old_rank);
  }
  // This rank left: tear its side down now (locally: left() makes every step local), so
  // that nothing of it reaches the old communicators, nor an exit handler later.
  Destroy();
  return result;
}

}  // namespace starling::runtime
