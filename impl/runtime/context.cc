#include "impl/runtime/context.h"

#include "impl/common/logging.h"

namespace starling::runtime {

std::shared_ptr<Context> Context::Create(const ContextOptions& options) {
  std::shared_ptr<Context> context(new Context());
  context->config_ = GlobalConfig();
  STARLING_CHECK_ARG(options.nodes_per_machine >= 0, "nodes_per_machine must be >= 0, got ",
                     options.nodes_per_machine);
  transport::MpiLifetime::Acquire(!options.use_host_comm);
  context->holds_mpi_ = true;
  try {
    MPI_Comm base = MPI_COMM_WORLD;
    if (options.use_host_comm) {
      STARLING_CHECK_ARG(options.host_comm >= INT32_MIN && options.host_comm <= INT32_MAX,
                         "host_comm ", options.host_comm, " is not a Fortran communicator handle");
      base = MPI_Comm_f2c(static_cast<MPI_Fint>(options.host_comm));
      // Open MPI answers an unknown handle with a null pointer rather than MPI_COMM_NULL.
      STARLING_CHECK_ARG(base != MPI_COMM_NULL && base != MPI_Comm{}, "host_comm ", options.host_comm,
                         " does not name a communicator (pass MPI_Comm_c2f(comm) or mpi4py's comm.py2f())");
    }
    context->transport_ = std::make_unique<transport::MpiTransport>(base);
    context->rank_ = context->transport_->rank();
    context->size_ = context->transport_->size();
    const int nodes = options.nodes_per_machine > 0 ? options.nodes_per_machine : context->config_.nodes_per_machine;
    context->layout_ = context->transport_->ComputeLayout(nodes);
    SetLogRank(context->rank_);
    // BlueFog's default: the unweighted exponential-2 graph.
    auto initial = std::make_shared<TopologyState>();
    initial->graph = std::make_shared<const topology::Graph>(topology::Exponential(context->size_, 2));
    context->topology_ = std::move(initial);
    if (!context->config_.timeline_prefix.empty())
      context->timeline_ = std::make_unique<Timeline>(context->config_.timeline_prefix, context->rank_);
    context->engine_ = std::make_unique<Engine>(*context);
    context->engine_->Start();
  } catch (...) {
    context->timeline_.reset();
    context->transport_.reset();
    context->holds_mpi_ = false;
    transport::MpiLifetime::Release();
    throw;
  }
  STARLING_LOG_DEBUG("context created: rank ", context->rank_, " of ", context->size_, ", machine ",
                     context->layout_.machine_rank, " of ", context->layout_.machine_size, ", local rank ",
                     context->layout_.local_rank, " of ", context->layout_.local_size);
  return context;
}

Context::~Context() {
  try {
    Destroy();
  } catch (...) {
    // Destructors never throw; Destroy reports its errors when called explicitly.
  }
}

void Context::Destroy() {
  std::lock_guard<std::mutex> lock(destroy_mutex_);
  if (destroyed_) return;
  destroyed_ = true;
  if (engine_) engine_->Stop();
  timeline_.reset();  // completes the JSON file
  // Windows may still exist: withdraw their posted receives while MPI is alive.
  if (background_stop_) background_stop_();
  background_ = nullptr;
  background_stop_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(extensions_mutex_);
    extensions_.clear();
  }
  transport_.reset();
  if (holds_mpi_) {
    holds_mpi_ = false;
    transport::MpiLifetime::Release();
  }
}

std::shared_ptr<const TopologyState> Context::topology() const {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  return topology_;
}

std::shared_ptr<const TopologyState> Context::machine_topology() const {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  return machine_topology_;
}

void Context::set_topology(std::shared_ptr<const TopologyState> state) {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  topology_ = std::move(state);
}

void Context::set_machine_topology(std::shared_ptr<const TopologyState> state) {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  machine_topology_ = std::move(state);
}

void Context::SetBackgroundService(std::function<bool()> service, std::function<void()> stop) {
  background_ = service;
  background_stop_ = std::move(stop);
  engine_->SetBackgroundPoll(std::move(service), config_.window_poll_microseconds * 1e-6);
}

bool Context::ServiceBackground() {
  if (!background_ || in_background_) return false;
  in_background_ = true;
  bool worked = false;
  try {
    worked = background_();
  } catch (...) {
    in_background_ = false;
    throw;
  }
  in_background_ = false;
  return worked;
}

void Context::MarkBroken(const std::string& reason) {
  std::lock_guard<std::mutex> lock(broken_mutex_);
  if (broken_.load()) return;
  broken_reason_ = reason;
  broken_.store(true);
}

void Context::CheckUsable() const {
  if (!broken_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(broken_mutex_);
  Fail(Code::kTransport, "the context is unusable after an earlier failure (", broken_reason_,
       "); destroy it");
}

}  // namespace starling::runtime
