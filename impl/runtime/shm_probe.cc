// The context's shared-memory probe (transport/shm/probe.h): run at creation over the
// collective communicator, and again over the new one after a repair or grow.
#include <chrono>
#include <cstring>

#include "impl/common/logging.h"
#include "impl/runtime/context.h"
#include "impl/transport/shm/summaries.h"

namespace starling::runtime {
namespace {

// An id every rank of the context agrees on without a message: rank 0's process
// identity (pid, start time, host), which no other running job shares.
uint64_t JobId(const ProcessIdentity& first) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint64_t v : {static_cast<uint64_t>(static_cast<uint32_t>(first.pid)), first.start_ticks, first.host_key}) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
  }
  return h ^ (h >> 31);
}

}  // namespace

void Context::ProbeSharedMemory() {
  const auto start = std::chrono::steady_clock::now();
  transport::shm::ProbeInput in;
  in.rank = rank_;
  in.size = size_;
  for (const ProcessIdentity& p : layout_.processes) {
    in.host_keys.push_back(p.host_key);
    in.host_names.emplace_back(p.host, strnlen(p.host, sizeof p.host));
  }
  if (in.host_keys.size() != static_cast<size_t>(size_)) {  // no layout: nothing is shared
    in.host_keys.assign(static_cast<size_t>(size_), 0);
    in.host_names.assign(static_cast<size_t>(size_), "?");
  }
  in.job = layout_.processes.empty() ? 0 : JobId(layout_.processes[0]);
  in.enabled = config_.shm;
  transport::MpiTransport* mpi = transport_.get();
  in.allgather = [mpi](const void* mine, size_t bytes, void* all) { mpi->AllgatherBytes(mine, bytes, all); };
  shm_ = transport::shm::ProbeHostPeers(in);
  // The neighbor outboxes of the pairs the probe accepted (collective likewise).
  transport::shm::LinksInput links;
  links.rank = rank_;
  links.size = size_;
  links.host_keys = in.host_keys;
  links.job = in.job;
  links.probe = &shm_;
  links.enabled = config_.shm;
  links.capacity = config_.shm_buffer_bytes;
  links.copy = config_.shm_copy == "plain"    ? transport::shm::CopyMode::kPlain
               : config_.shm_copy == "stream" ? transport::shm::CopyMode::kStream
                                              : transport::shm::CopyMode::kAuto;
  links.allgather = in.allgather;
  std::string why;
  shm_links_ = transport::shm::NeighborLinks::Connect(links, &why);
  if (!why.empty()) STARLING_LOG_DEBUG("shared memory for neighbor data: ", why, " (those pairs use MPI)");
  if (shm_links_) STARLING_LOG_DEBUG("neighbor data through shared memory with rank(s) ", shm_links_->Describe());
  if (shm_summary_ == 0) shm_summary_ = transport::shm::AddSummary(shm_.summary);
  else transport::shm::UpdateSummary(shm_summary_, shm_.summary);
  STARLING_LOG_DEBUG("shared memory: ", shm_.summary, " (probed in ",
                     std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count(),
                     " us)");
}

void Context::ReprobeSharedMemory(const std::string& why) {
  // Every pair on MPI (what a failed probe leaves too).
  auto forget = [this] {
    shm_ = transport::shm::ProbeResult{};
    shm_links_.reset();  // by old rank numbers; exchanges in flight keep theirs alive
    shm_.pairs.resize(static_cast<size_t>(size_));
  };
  forget();
  try {
    ProbeSharedMemory();  // segment names carry fresh nonces: no clash with the old links'
  } catch (const std::exception& e) {
    forget();
    shm_.summary = Str("off (the probe after ", why, " failed: ", e.what(), ")");
    if (shm_summary_ == 0) shm_summary_ = transport::shm::AddSummary(shm_.summary);  // a newcomer
    else transport::shm::UpdateSummary(shm_summary_, shm_.summary);
  }
}

}  // namespace starling::runtime
