// What repair, grow and shrink share: the checks before a resize, the agreement on the
// options, the topology after it, and installing the new communicators with the new numbering.
#include "impl/common/logging.h"
#include "impl/common/quarantine.h"
#include "impl/runtime/context.h"
#include "impl/topology/regenerate.h"
#include "impl/transport/mpi/ulfm.h"

namespace starling::runtime {
namespace {

// FNV-1a over the options every rank must agree on; never negative (negative values
// carry errors in the agreement).
int Fingerprint(const std::vector<char>& bytes) {
  uint32_t h = 2166136261u;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return static_cast<int>(h & 0x7fffffffu);
}

}  // namespace

void Context::CheckResizable(const char* call, const char* verb) const {
  STARLING_CHECK(!destroyed_, Code::kInvalidHandle, "the context was destroyed");
  STARLING_CHECK(!aborted(), Code::kAborted, "the context was aborted (starling_context_abort); destroy it");
  STARLING_CHECK(!split_, Code::kInvalidUsage, call, ": this context was made by starling_context_split and cannot ",
                 verb, "; ", verb, " the context it came from and split that again");
  STARLING_CHECK(fault_tolerant(), Code::kUnsupported, call, ": ", transport::UlfmMissing());
  if (broken_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(broken_mutex_);
    Fail(Code::kInvalidUsage, call, ": the context failed earlier (", broken_reason_,
         "); repair it (starling_context_repair) first");
  }
  STARLING_CHECK(live_windows_.load() == 0, Code::kInvalidUsage, call, ": ", live_windows_.load(),
                 " window(s) exist; free them before the ", verb, " and create them again after it");
}

void Context::AgreeOnOptions(const char* call, const std::string& problem, const std::vector<char>& agreed,
                             const char* what) {
  const int mine = problem.empty() ? Fingerprint(agreed) : -1;
  const std::vector<int> all = transport_->AllgatherInt(mine);
  STARLING_CHECK_ARG(problem.empty(), call, ": ", problem);
  for (int r = 0; r < size_; ++r) {
    STARLING_CHECK_ARG(all[static_cast<size_t>(r)] >= 0, call, ": rank ", r,
                       "'s options are invalid (its own call says why)");
    STARLING_CHECK_ARG(all[static_cast<size_t>(r)] == mine, call, ": rank ", r, " passed other options (", what,
                       " must be the same on every rank)");
  }
}

std::shared_ptr<TopologyState> Context::TopologyAfter(const std::shared_ptr<const topology::Graph>& given,
                                                      bool weighted, const std::vector<int>& old_to_new,
                                                      int new_size, std::string* name) const {
  auto state = std::make_shared<TopologyState>();
  if (given) {
    state->graph = given;
    state->weighted = weighted;
    *name = "given";
  } else {
    const std::shared_ptr<const TopologyState> current = topology();
    state->graph =
        std::make_shared<const topology::Graph>(topology::Regenerate(*current->graph, old_to_new, new_size, name));
    state->weighted = current->weighted;
  }
  return state;
}

void Context::Renumber(std::unique_ptr<transport::MpiTransport> fresh, transport::Layout layout,
                       std::shared_ptr<TopologyState> topology, const std::string& why) {
  // Receives on the old communicators that could not be withdrawn keep the old
  // transport (and its buffers) alive until the process exits.
  {
    std::lock_guard<std::mutex> lock(notice_mutex_);
    WithdrawNoticeReceive();
    std::unique_ptr<transport::MpiTransport> old = std::move(transport_);
    if (old->abandoned_receives() > 0) Quarantine(std::shared_ptr<transport::MpiTransport>(std::move(old)));
    transport_ = std::move(fresh);
  }
  rank_ = transport_->rank();
  size_ = transport_->size();
  layout_ = std::move(layout);
  WireTransport();
  SetLogRank(rank_);
  ReprobeSharedMemory(why);
  {
    std::lock_guard<std::mutex> lock(topology_mutex_);
    topology_ = std::move(topology);
    machine_topology_.reset();
  }
  sequence_ = 0;
  notified_.store(false);
  ClearStallNews();
  {
    std::lock_guard<std::mutex> lock(departures_mutex_);
    departures_.clear();  // old ranks' numbers
    any_departure_.store(false);
  }
  {
    std::lock_guard<std::mutex> lock(broken_mutex_);  // a repair's own mark
    broken_reason_.clear();
    broken_code_ = Code::kTransport;
    peer_failed_.store(false, std::memory_order_release);
    broken_.store(false, std::memory_order_release);
  }
  PostNoticeReceive();
}

}  // namespace starling::runtime
