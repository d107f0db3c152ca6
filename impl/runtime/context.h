// A context: a group of ranks (an MPI communicator), its machine layout, its
// configuration and its progress engine. Everything an executing operation needs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "impl/common/config.h"
#include "impl/runtime/engine.h"
#include "impl/runtime/scratch.h"
#include "impl/transport/mpi/mpi_transport.h"

namespace starling::runtime {

struct ContextOptions {
  bool use_host_comm = false;
  int64_t host_comm = 0;  // Fortran handle
  int nodes_per_machine = 0;
};

class Context {
 public:
  // Collective over the communicator. Throws Error.
  static std::shared_ptr<Context> Create(const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Collective: runs every submitted operation, stops the engine, releases MPI.
  // Idempotent.
  void Destroy();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const transport::Layout& layout() const { return layout_; }
  const Config& config() const { return config_; }
  transport::Transport& transport() { return *transport_; }
  Engine& engine() { return *engine_; }

  // --- for the executing operation (execution lock held) ---
  ScratchPool& scratch() { return scratch_; }
  // Sequence number of the next collective operation: equal on every rank for the
  // same operation, so messages from a rank that skipped or added one are caught.
  uint64_t NextSequence() { return ++sequence_; }

  // After a timeout or transport failure, every later operation fails fast with the
  // original reason instead of hanging.
  void MarkBroken(const std::string& reason);
  void CheckUsable() const;

 private:
  Context() = default;

  Config config_;
  std::unique_ptr<transport::MpiTransport> transport_;
  std::unique_ptr<Engine> engine_;
  transport::Layout layout_;
  int rank_ = 0;
  int size_ = 1;
  bool holds_mpi_ = false;
  bool destroyed_ = false;
  std::mutex destroy_mutex_;

  ScratchPool scratch_;
  uint64_t sequence_ = 0;

  std::atomic<bool> broken_{false};
  mutable std::mutex broken_mutex_;
  std::string broken_reason_;
};

}  // namespace starling::runtime
