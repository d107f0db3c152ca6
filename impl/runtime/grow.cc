// Context::Grow and the newcomer's side of it (Context::Create calls JoinGrow): the
// current ranks spawn processes, both sides merge into one communicator in the order
// asked, and the newcomers receive the topology. See starling_context_grow.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "impl/common/bytes.h"
#include "impl/common/logging.h"
#include "impl/runtime/context.h"
#include "impl/topology/regenerate.h"
#include "impl/transport/mpi/spawn.h"
#include "impl/transport/mpi/ulfm.h"

namespace starling::runtime {
namespace {

constexpr int32_t kJoinMagic = 0x53474a31;  // "SGJ1"

// What the newcomers learn from the current ranks (one broadcast over the merged
// communicator): the old size, their ranks, the grown topology (null while the options
// are invalid: the message then only serves the agreement).
struct JoinHeader {
  int old_size = 0;
  std::vector<int> joined;
  std::shared_ptr<const topology::Graph> graph;
  bool weighted = false;
};

constexpr const char* kJoinMessage = "starling_context_grow's join message";

std::vector<char> Encode(const JoinHeader& h) {
  std::vector<char> out;
  PutBytes<int32_t>(&out, kJoinMagic);
  PutBytes<int32_t>(&out, h.old_size);
  PutBytes<int32_t>(&out, static_cast<int32_t>(h.joined.size()));
  for (int r : h.joined) PutBytes<int32_t>(&out, r);
  PutBytes<int32_t>(&out, h.weighted ? 1 : 0);
  PutBytes<int32_t>(&out, h.graph ? 1 : 0);
  if (h.graph) h.graph->AppendTo(&out);
  return out;
}

JoinHeader Decode(const std::vector<char>& in) {
  size_t at = 0;
  STARLING_CHECK(TakeBytes<int32_t>(in, &at, kJoinMessage) == kJoinMagic, Code::kTransport,
                 "starling_context_grow: the parent job sent no join message (is it a Starling job of the same version?)");
  JoinHeader h;
  h.old_size = TakeBytes<int32_t>(in, &at, kJoinMessage);
  const int count = TakeBytes<int32_t>(in, &at, kJoinMessage);
  for (int i = 0; i < count; ++i) h.joined.push_back(TakeBytes<int32_t>(in, &at, kJoinMessage));
  h.weighted = TakeBytes<int32_t>(in, &at, kJoinMessage) == 1;
  STARLING_CHECK(TakeBytes<int32_t>(in, &at, kJoinMessage) == 1, Code::kInternal, kJoinMessage, " has no topology");
  h.graph = std::make_shared<const topology::Graph>(topology::Graph::ReadFrom(in, &at, kJoinMessage));
  return h;
}

}  // namespace

MPI_Comm Context::JoinGrow(std::shared_ptr<TopologyState>* topology) {
  MPI_Comm merged = transport::JoinMerged();
  if (merged == MPI_COMM_NULL) return MPI_COMM_NULL;
  try {
    std::vector<char> bytes;
    transport::BroadcastBytes(merged, 0, &bytes);
    const JoinHeader h = Decode(bytes);
    int merged_rank = 0;
    MPI_Comm_rank(merged, &merged_rank);
    const int index = merged_rank - h.old_size;
    STARLING_CHECK(index >= 0 && index < static_cast<int>(h.joined.size()), Code::kInternal,
                   "starling_context_grow: newcomer ", merged_rank, " has no place (", h.joined.size(), " expected)");
    MPI_Comm ordered = transport::Reorder(merged, h.joined[static_cast<size_t>(index)]);
    MPI_Comm_free(&merged);
    auto state = std::make_shared<TopologyState>();
    state->graph = h.graph;
    state->weighted = h.weighted;
    *topology = std::move(state);
    return ordered;
  } catch (...) {
    if (merged != MPI_COMM_NULL) MPI_Comm_free(&merged);
    throw;
  }
}

GrowResult Context::Grow(const GrowOptions& options, const std::function<void(const GrowResult&)>& attach) {
  std::lock_guard<std::mutex> destroy_lock(destroy_mutex_);
  CheckResizable("starling_context_grow", "grow");
  // Runs what was submitted before, then holds the execution lock: nothing else runs.
  std::unique_lock<std::mutex> exec = engine_->Drain();

  GrowResult result;
  result.old_rank = rank_;
  result.old_size = size_;
  result.new_size = size_ + options.count;
  // Local checks, then one agreement: every rank learns whether any rank's options are
  // bad or differ (no rank is left waiting in the spawn).
  std::string problem;
  JoinHeader header;
  header.old_size = size_;
  if (options.count < 1) {
    problem = Str("options->count must be >= 1, got ", options.count);
  } else {
    header.joined = options.ranks;
    if (header.joined.empty())
      for (int i = 0; i < options.count; ++i) header.joined.push_back(size_ + i);
    std::set<int> seen;
    for (int r : header.joined) {
      if (r < 0 || r >= result.new_size) problem = Str("options->ranks: ", r, " is not in [0, ", result.new_size, ")");
      else if (!seen.insert(r).second) problem = Str("options->ranks: ", r, " is given twice");
    }
    if (problem.empty() && static_cast<int>(header.joined.size()) != options.count)
      problem = Str("options->ranks has ", header.joined.size(), " entries for count ", options.count);
  }
  if (problem.empty()) {
    if (options.graph) {
      if (options.graph->size() != result.new_size)
        problem = Str("options->topology has ", options.graph->size(), " ranks but the grown context has ",
                      result.new_size);
      header.graph = options.graph;
      header.weighted = options.weighted;
      result.topology = "given";
    } else {
      const std::shared_ptr<const TopologyState> current = this->topology();
      std::optional<topology::Graph> same = topology::SameGenerator(*current->graph, result.new_size, &result.topology);
      if (same) {
        header.graph = std::make_shared<const topology::Graph>(std::move(*same));
      } else {
        problem = Str("the current topology is not one of Starling's generators (or not for ", result.new_size,
                      " ranks): pass options->topology");
      }
      header.weighted = current->weighted;
    }
  }
  // A name without a slash is looked up on PATH by the launcher.
  if (problem.empty() && rank_ == 0 && options.command.find('/') != std::string::npos &&
      access(options.command.c_str(), X_OK) != 0)
    problem = Str("options->command '", options.command, "' is not an executable file (", std::strerror(errno), ")");
  std::vector<char> agreed_bytes = Encode(header);
  AgreeOnOptions("starling_context_grow", problem, agreed_bytes, "count, ranks, topology or is_weighted");

  // The new order: newcomers where asked, the current ranks in the other places.
  std::vector<bool> taken(static_cast<size_t>(result.new_size), false);
  for (int r : header.joined) taken[static_cast<size_t>(r)] = true;
  for (int r = 0, next = 0; r < size_; ++r) {
    while (taken[static_cast<size_t>(next)]) ++next;
    result.old_to_new.push_back(next++);
  }
  result.joined = header.joined;
  result.new_rank = result.old_to_new[static_cast<size_t>(rank_)];

  std::unique_ptr<transport::MpiTransport> fresh;
  transport::Layout layout;
  MPI_Comm merged = MPI_COMM_NULL, ordered = MPI_COMM_NULL;
  try {
    const double limit = config_.timeout_seconds > 0 ? config_.timeout_seconds : transport::kDefaultGrowLimitSeconds;
    merged = transport::SpawnMerged(transport_->base_comm(), 0, options.command, options.argv, options.count, limit);
    transport::BroadcastBytes(merged, 0, &agreed_bytes);
    ordered = transport::Reorder(merged, result.new_rank);
    MPI_Comm_free(&merged);
    fresh = std::make_unique<transport::MpiTransport>(ordered);
    MPI_Comm_free(&ordered);
    STARLING_CHECK(fresh->rank() == result.new_rank && fresh->size() == result.new_size, Code::kInternal,
                   "starling_context_grow: rank ", fresh->rank(), " of ", fresh->size(), ", expected ",
                   result.new_rank, " of ", result.new_size);
    layout = fresh->ComputeLayout(nodes_per_machine_);
    bool failed = false;
    const int agreed = fresh->Agree(1, &failed);
    STARLING_CHECK(!failed && agreed == 1, Code::kPeerFailed,
                   "a process failed during starling_context_grow; the context is unchanged");
  } catch (...) {
    if (merged != MPI_COMM_NULL) MPI_Comm_free(&merged);
    if (ordered != MPI_COMM_NULL) MPI_Comm_free(&ordered);
    if (fresh) fresh->Revoke();
    throw;
  }

  {
    auto state = std::make_shared<TopologyState>();
    state->graph = std::move(header.graph);
    state->weighted = header.weighted;
    Renumber(std::move(fresh), std::move(layout), std::move(state), "starling_context_grow");
  }
  grown_ = true;
  if (attach) attach(result);
  STARLING_LOG_INFO("context grown: ", result.old_size, " -> ", result.new_size, " ranks (this rank ",
                    result.old_rank, " -> ", result.new_rank, "), topology: ", result.topology);
  return result;
}

}  // namespace starling::runtime
