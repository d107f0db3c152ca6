// starling_bench --device cuda: each Starling operation on CUDA tensors against the
// hand-written GPU code a careful programmer would use for the same bytes, measured in
// one run with bench::Compare's alternating batches. The reference depends on the path
// the context took (starling_gpu_path, printed with the table):
//
// - staged: hand-made staging. Device-to-pinned memcpy_async in chunks of
//   STARLING_GPU_CHUNK_BYTES with an event per chunk; raw MPI (MPI_Allreduce, MPI_Bcast,
//   or Irecv/Isend/Waitall + the same combine) on each chunk as soon as its event
//   completes; memcpy_async back; one stream synchronize. The same pipeline Starling
//   runs, without Starling. Target: within 1.15x from 1 MiB.
// - nccl: the plugin's NCCL calls (ncclAllReduce, ncclBroadcast; grouped send/recv +
//   weighted_sum for neighbors) on a communicator the benchmark creates itself, on its
//   own stream, synchronized after each call. Target: within 1.10x from 1 MiB, +10 us
//   below.
// - combine: the plugin's weighted_sum kernel (k = 2, float32) against a device-to-device
//   copy of the same output bytes. The kernel moves twice the copy's bytes (reads x, r0,
//   r1, writes out: 4n floats against 2n), so its bandwidth relative to the copy's is
//   2 * copy time / kernel time. Target: at least 70%.
//
// Both sides reach the GPU only through the device plugin table (impl/device/plugin_abi.h)
// opened from the same file the core opens, so they share one device state, and the same
// binary runs on a GPU (libstarling_cuda.so) and on the emulated device (a smoke test:
// its times are host memcpy and sockets, not GPU figures; the output says so).
#include "bench_gpu.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "impl/common/dtype.h"
#include "impl/device/plugin_abi.h"

namespace bench {
namespace {

constexpr int kFloat32 = static_cast<int>(starling::DType::kFloat32);
constexpr int kSum = static_cast<int>(starling::ReduceOp::kSum);

// Fails the run (every rank: MPI_Abort) when a plugin call fails after setup; setup
// failures take the clean path in RunGpu instead.
void Ok(const starling_device_plugin_t* p, int status, const char* call) {
  if (status == 0) return;
  std::fprintf(stderr, "%s failed: %s\n", call, p->last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// The directory of libstarling.so, where the core looks for libstarling_cuda.so.
std::string StarlingDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&starling_get_version), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

// True on every rank if `ok` is true on every rank; otherwise *first_failed is the
// lowest rank that failed (it prints the reason, so that the output is not repeated).
bool Everywhere(bool ok, int* first_failed) {
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int failed = ok ? size : rank;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  *first_failed = failed;
  return failed == size;
}

// The device side of the run: the plugin, this rank's device, the reference's stream,
// events and NCCL communicator, and the buffers both sides use. Everything it made is
// released by the destructor (before the context is destroyed).
class Gpu {
 public:
  ~Gpu() {
    if (!p_) return;
    if (stream_) p_->stream_synchronize(stream_);
    if (nccl_comm_) p_->nccl_comm_destroy(nccl_comm_);
    for (void* e : events_) p_->event_destroy(e);
    for (void* d : device_memory_) p_->device_free(d);
    for (void* h : pinned_memory_) p_->host_free(h);
    if (stream_) p_->stream_destroy(stream_);
  }

  // Opens the plugin as impl/device/device.cc does: STARLING_DEVICE_PLUGIN, else
  // libstarling_cuda.so beside libstarling.so. dlopen of the same file returns the
  // library the core loads, so both sides see one (real or emulated) device.
  bool Load(std::string* why) {
    const char* env = std::getenv("STARLING_DEVICE_PLUGIN");
    path_ = env && *env ? env : StarlingDirectory() + "libstarling_cuda.so";
    void* handle = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      *why = "cannot load the device plugin " + path_ + ": " + (err ? err : "dlopen failed") +
             (env && *env ? "" : " (a build without the CUDA toolkit has none; STARLING_DEVICE_PLUGIN names another)");
      return false;
    }
    auto entry = reinterpret_cast<starling_device_plugin_entry_t>(dlsym(handle, STARLING_DEVICE_PLUGIN_ENTRY));
    if (!entry) {
      *why = path_ + " has no " STARLING_DEVICE_PLUGIN_ENTRY " (not a Starling device plugin)";
      return false;
    }
    const starling_device_plugin_t* table = entry();
    if (!table || table->abi_version != STARLING_DEVICE_ABI_VERSION ||
        table->struct_size < sizeof(starling_device_plugin_t)) {
      *why = path_ + " is not a device plugin of this Starling version";
      return false;
    }
    if (table->init() != 0) {
      *why = "no usable GPU: " + std::string(table->last_error()) + " (device plugin " + path_ + ")";
      return false;
    }
    int count = 0;
    if (table->device_count(&count) != 0) {
      *why = "device_count: " + std::string(table->last_error()) + " (" + path_ + ")";
      return false;
    }
    if (count < 1) {
      *why = "no usable GPU: the device plugin " + path_ + " reports no device";
      return false;
    }
    p_ = table;
    count_ = count;
    // Emulator-only helpers exist by name (as in tests/gpu/gpu_test_util.h).
    emulated_ = dlsym(handle, "starling_emu_sleep_on_stream") != nullptr;
    return true;
  }

  // This rank's device, the reference stream and the buffers. Empty on success.
  std::string Prepare(int rank, int local_rank, size_t max_bytes, size_t chunk_bytes) {
    // local rank % device count: one GPU per rank where there are enough (the NCCL
    // path), ranks sharing GPUs where there are more ranks (CUDA_VISIBLE_DEVICES=0 makes
    // every rank use one).
    device_ = local_rank % count_;
    chunk_floats_ = std::max<size_t>(1, chunk_bytes / 4);
    if (p_->stream_create(device_, &stream_) != 0) return std::string("stream_create: ") + p_->last_error();
    const size_t bytes = std::max<size_t>(max_bytes, 4);
    if (!Alloc(bytes, &x_) || !Alloc(bytes, &y_)) return std::string("device_alloc: ") + p_->last_error();
    for (float** h : {&a_, &c_}) {
      void* ptr = nullptr;
      if (p_->host_alloc(device_, bytes, &ptr) != 0) return std::string("host_alloc: ") + p_->last_error();
      pinned_memory_.push_back(ptr);
      *h = static_cast<float*>(ptr);
    }
    max_bytes_ = bytes;
    rank_ = rank;
    Fill();
    Sync(p_->memcpy_async(y_, x_, bytes, stream_), "memcpy_async");
    return "";
  }

  // x = this rank's input, different on every rank (as in the host families) so that
  // results depend on all; again before each family (the broadcast overwrote it).
  void Fill() {
    for (size_t i = 0; i < max_bytes_ / 4; ++i)
      a_[i] = static_cast<float>((i * 7 + static_cast<size_t>(rank_)) % 13) * 0.25f;
    Sync(p_->memcpy_async(x_, a_, max_bytes_, stream_), "memcpy_async");
  }

  // k device buffers of max_bytes (neighbor receives, combine inputs), holding x's data.
  bool EnsureInputs(size_t k, std::string* why) {
    while (r_.size() < k) {
      void* ptr = nullptr;
      if (!Alloc(max_bytes_, &ptr)) {
        *why = std::string("device_alloc: ") + p_->last_error();
        return false;
      }
      Sync(p_->memcpy_async(ptr, x_, max_bytes_, stream_), "memcpy_async");
      r_.push_back(ptr);
    }
    return true;
  }

  // A communicator of the benchmark's own, as an NCCL program makes one: rank 0's id
  // goes out by MPI_Bcast. Empty on success; the same outcome on every rank.
  std::string InitNccl(int rank, int size) {
    std::string why;
    if (p_->nccl_load() != 0) why = std::string("nccl_load: ") + p_->last_error();
    unsigned char id[STARLING_NCCL_ID_BYTES + 1] = {};  // the id, then rank 0's verdict
    if (rank == 0 && why.empty()) {
      if (p_->nccl_unique_id(id) == 0) {
        id[STARLING_NCCL_ID_BYTES] = 1;
      } else {
        why = std::string("nccl_unique_id: ") + p_->last_error();
      }
    }
    MPI_Bcast(id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    int first_failed = 0;
    // Everyone must be able to take part before anyone enters the collective init.
    if (!Everywhere(why.empty() && id[STARLING_NCCL_ID_BYTES], &first_failed))
      return why.empty() ? std::string("NCCL cannot be used on rank ") + std::to_string(first_failed) : why;
    if (p_->nccl_comm_init(&nccl_comm_, size, id, rank, device_) != 0) {
      why = std::string("nccl_comm_init: ") + p_->last_error();
      nccl_comm_ = nullptr;
    }
    // The init is non-blocking: wait until the communicator is ready (or failed).
    for (int state = 1; nccl_comm_ != nullptr && state == 1;) {
      if (p_->nccl_comm_status(nccl_comm_, &state) != 0 || state == 2) {
        why = std::string("nccl_comm_init: ") + p_->last_error();
        p_->nccl_comm_abort(nccl_comm_);
        nccl_comm_ = nullptr;
      }
    }
    if (!Everywhere(why.empty(), &first_failed)) {
      if (nccl_comm_) p_->nccl_comm_abort(nccl_comm_);
      nccl_comm_ = nullptr;
      return why.empty() ? std::string("nccl_comm_init failed on rank ") + std::to_string(first_failed) : why;
    }
    return "";
  }

  // The hand-written staged pipeline over n floats: chunk c of d_in is copied to h_in
  // (event c); as each chunk's event completes, mpi(first, count) runs on it and the
  // chunk of h_out is queued back to d_out; one synchronize at the end. d_in or d_out
  // null: no copy that way (broadcast's root only copies in, the others only out).
  // One chunk when n fits (as Starling, which chunks only larger tensors).
  void Staged(size_t n, const void* d_in, float* h_in, float* h_out, void* d_out,
              const std::function<void(size_t, size_t)>& mpi) {
    const size_t chunks = (n + chunk_floats_ - 1) / chunk_floats_;
    while (events_.size() < chunks) {
      void* e = nullptr;
      Ok(p_, p_->event_create(device_, &e), "event_create");
      events_.push_back(e);
    }
    auto count_of = [&](size_t c) { return std::min(chunk_floats_, n - c * chunk_floats_); };
    if (d_in) {
      for (size_t c = 0; c < chunks; ++c) {
        const size_t first = c * chunk_floats_;
        Ok(p_, p_->memcpy_async(h_in + first, static_cast<const float*>(d_in) + first, count_of(c) * 4, stream_),
           "memcpy_async");
        Ok(p_, p_->event_record(events_[c], stream_), "event_record");
      }
    }
    for (size_t c = 0; c < chunks; ++c) {
      const size_t first = c * chunk_floats_;
      if (d_in) Ok(p_, p_->event_synchronize(events_[c]), "event_synchronize");
      mpi(first, count_of(c));
      if (d_out)
        Ok(p_, p_->memcpy_async(static_cast<float*>(d_out) + first, h_out + first, count_of(c) * 4, stream_),
           "memcpy_async");
    }
    Ok(p_, p_->stream_synchronize(stream_), "stream_synchronize");
  }

  void Sync(int status, const char* call) {
    Ok(p_, status, call);
    Ok(p_, p_->stream_synchronize(stream_), "stream_synchronize");
  }

  DLTensor Tensor(void* data, int64_t* shape) const {
    DLTensor t = bench::Tensor(static_cast<float*>(data), shape);
    t.device = {kDLCUDA, device_};
    return t;
  }

  const starling_device_plugin_t* p() const { return p_; }
  bool emulated() const { return emulated_; }
  int device() const { return device_; }
  void* stream() const { return stream_; }
  void* nccl_comm() const { return nccl_comm_; }
  void* x() const { return x_; }
  void* y() const { return y_; }
  float* a() const { return a_; }
  float* c() const { return c_; }
  const std::vector<void*>& r() const { return r_; }
  size_t chunk_floats() const { return chunk_floats_; }

 private:
  bool Alloc(size_t bytes, void** ptr) {
    if (p_->device_alloc(device_, bytes, ptr) != 0) return false;
    device_memory_.push_back(*ptr);
    return true;
  }

  const starling_device_plugin_t* p_ = nullptr;
  std::string path_;
  bool emulated_ = false;
  int count_ = 0;
  int device_ = 0;
  int rank_ = 0;
  size_t chunk_floats_ = 1;
  size_t max_bytes_ = 4;
  void* stream_ = nullptr;
  void* nccl_comm_ = nullptr;
  void* x_ = nullptr;  // device: every family's input
  void* y_ = nullptr;  // device: output
  float* a_ = nullptr;  // pinned: the staged reference's input copy
  float* c_ = nullptr;  // pinned: its output copy
  std::vector<void*> r_;  // device: received blocks / combine inputs
  std::vector<void*> events_, device_memory_, pinned_memory_;
};

// Both sides must compute the same thing, or the comparison means nothing: one call of
// each, and the output (x for the in-place broadcast, else y) must agree within
// rounding (the summation orders differ: MPI's or NCCL's against Starling's).
void SameResult(const BenchContext& b, Gpu& gpu, const std::string& op, size_t bytes,
                const std::function<void()>& reference, const std::function<void()>& starling, bool nccl) {
  const size_t n = bytes / 4;  // of the output
  void* const result = op == "broadcast" ? gpu.x() : gpu.y();
  std::vector<float> want(n), got(n);
  reference();
  gpu.Sync(gpu.p()->memcpy_async(want.data(), result, bytes, gpu.stream()), "memcpy_async");
  // Overwrite the output so that Starling must write it (not the root's broadcast input).
  if (op != "broadcast" || b.rank != 0) {
    const std::vector<float> garbage(n, -12345.0f);
    gpu.Sync(gpu.p()->memcpy_async(result, garbage.data(), bytes, gpu.stream()), "memcpy_async");
  }
  starling();
  gpu.Sync(gpu.p()->memcpy_async(got.data(), result, bytes, gpu.stream()), "memcpy_async");
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(got[i] - want[i]) <= 1e-5f * (std::fabs(want[i]) + 1.0f)) continue;
    std::fprintf(stderr, "rank %d: %s (%s) at %s: element %zu is %g, the reference computed %g\n", b.rank,
                 op.c_str(), nccl ? "nccl" : "staged", HumanBytes(bytes).c_str(), i, got[i], want[i]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// One family at every size: the reference (by path) against Starling on (x, y).
std::vector<Row> RunFamily(BenchContext& b, Gpu& gpu, const std::string& op, bool nccl,
                           const std::vector<size_t>& sizes) {
  const starling_device_plugin_t* p = gpu.p();
  const std::string path = nccl ? "nccl" : "staged";  // in the variant (no commas: CSV)
  std::vector<Row> rows;
  Peers peers;
  starling_topology_t topo = nullptr;
  const bool neighbor = op.rfind("neighbor_", 0) == 0;
  if (neighbor) {
    if (op == "neighbor_ring") {
      Check(starling_topology_ring(b.size, STARLING_RING_BIDIRECTIONAL, &topo), "ring");
    } else {
      Check(starling_topology_exponential_two(b.size, &topo), "exp2");
    }
    Check(starling_set_topology(b.ctx, topo, 0), "set_topology");
    starling_topology_free(topo);
    peers = StaticPeers(b.ctx);
  }
  gpu.Fill();
  std::string why;
  const size_t inputs = op == "combine" ? 2 : neighbor ? peers.recv.size() : 0;
  if (!gpu.EnsureInputs(inputs, &why)) {
    std::fprintf(stderr, "rank %d: %s\n", b.rank, why.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // The staged neighbor reference receives into host memory (it never touches the GPU).
  std::vector<std::vector<float>> scratch(peers.recv.size(), std::vector<float>(gpu.chunk_floats()));
  void* const x = gpu.x();
  void* const y = gpu.y();
  void* const stream = gpu.stream();
  void* const comm = gpu.nccl_comm();

  for (size_t bytes : sizes) {
    int64_t n = static_cast<int64_t>(bytes / 4);
    const size_t count = static_cast<size_t>(n);
    DLTensor in = gpu.Tensor(x, &n), out = gpu.Tensor(y, &n);
    // reduce_scatter and alltoall: size() blocks of `block` floats (a size that does not
    // divide them is cut down to a multiple).
    const size_t block = count / static_cast<size_t>(b.size), whole = block * static_cast<size_t>(b.size);
    int64_t whole_n = static_cast<int64_t>(whole), block_n = static_cast<int64_t>(block);
    size_t result_bytes = bytes;
    if (op == "reduce_scatter" || op == "alltoall") {
      if (block == 0) continue;
      in = gpu.Tensor(x, &whole_n);
      out = gpu.Tensor(y, op == "alltoall" ? &whole_n : &block_n);
      result_bytes = (op == "alltoall" ? whole : block) * 4;
    }
    std::function<void()> reference, starling;
    std::string variant;
    if (op == "allreduce") {
      variant = path + " sum";
      starling = [&] { Check(starling_allreduce(b.ctx, &in, &out, STARLING_SUM, nullptr), "allreduce"); };
      if (nccl) {
        reference = [&] {
          Ok(p, p->nccl_all_reduce(x, y, count, kFloat32, kSum, comm, stream), "nccl_all_reduce");
          Ok(p, p->stream_synchronize(stream), "stream_synchronize");
        };
      } else {
        reference = [&] {
          gpu.Staged(count, x, gpu.a(), gpu.c(), y, [&](size_t first, size_t k) {
            MPI_Allreduce(gpu.a() + first, gpu.c() + first, static_cast<int>(k), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          });
        };
      }
    } else if (op == "broadcast") {
      variant = path + " root 0";  // in place, as in the host family
      starling = [&] { Check(starling_broadcast(b.ctx, &in, &in, 0, nullptr), "broadcast"); };
      if (nccl) {
        reference = [&] {
          Ok(p, p->nccl_broadcast(x, x, bytes, 0, comm, stream), "nccl_broadcast");
          Ok(p, p->stream_synchronize(stream), "stream_synchronize");
        };
      } else {
        // The root only copies in and the others only copy out: what a hand-written
        // broadcast needs.
        const bool root = b.rank == 0;
        reference = [&, root] {
          gpu.Staged(count, root ? x : nullptr, gpu.a(), gpu.a(), root ? nullptr : x, [&](size_t first, size_t k) {
            MPI_Bcast(gpu.a() + first, static_cast<int>(k), MPI_FLOAT, 0, MPI_COMM_WORLD);
          });
        };
      }
    } else if (op == "reduce_scatter") {
      variant = path + " sum";
      starling = [&] {
        Check(starling_reduce_scatter(b.ctx, &in, &out, nullptr, STARLING_SUM, nullptr), "reduce_scatter");
      };
      if (nccl) {
        reference = [&] {
          Ok(p, p->nccl_reduce_scatter(x, y, block, kFloat32, kSum, comm, stream), "nccl_reduce_scatter");
          Ok(p, p->stream_synchronize(stream), "stream_synchronize");
        };
      } else {  // as Starling stages it: the whole input in, the block out
        reference = [&] {
          gpu.Sync(p->memcpy_async(gpu.a(), x, whole * 4, stream), "memcpy_async");
          MPI_Reduce_scatter_block(gpu.a(), gpu.c(), static_cast<int>(block), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          gpu.Sync(p->memcpy_async(y, gpu.c(), block * 4, stream), "memcpy_async");
        };
      }
    } else if (op == "alltoall") {
      variant = path + " equal";
      starling = [&] { Check(starling_alltoall(b.ctx, &in, &out, nullptr, nullptr, nullptr), "alltoall"); };
      if (nccl) {
        reference = [&] {
          const size_t block_bytes = block * 4;
          char* src = static_cast<char*>(x);
          char* dst = static_cast<char*>(y);
          Ok(p, p->memcpy_async(dst + b.rank * block_bytes, src + b.rank * block_bytes, block_bytes, stream),
             "memcpy_async");
          Ok(p, p->nccl_group_start(), "nccl_group_start");
          for (int q = 0; q < b.size; ++q) {
            if (q == b.rank) continue;
            Ok(p, p->nccl_send(src + q * block_bytes, block_bytes, q, comm, stream), "nccl_send");
            Ok(p, p->nccl_recv(dst + q * block_bytes, block_bytes, q, comm, stream), "nccl_recv");
          }
          Ok(p, p->nccl_group_end(), "nccl_group_end");
          Ok(p, p->stream_synchronize(stream), "stream_synchronize");
        };
      } else {
        reference = [&] {
          gpu.Sync(p->memcpy_async(gpu.a(), x, whole * 4, stream), "memcpy_async");
          MPI_Alltoall(gpu.a(), static_cast<int>(block), MPI_FLOAT, gpu.c(), static_cast<int>(block), MPI_FLOAT,
                       MPI_COMM_WORLD);
          gpu.Sync(p->memcpy_async(y, gpu.c(), whole * 4, stream), "memcpy_async");
        };
      }
    } else if (neighbor) {
      variant = path + " " + op.substr(std::strlen("neighbor_"));
      starling = [&] { Check(starling_neighbor_allreduce(b.ctx, &in, &out, nullptr), "neighbor_allreduce"); };
      if (nccl) {
        // Starling's NCCL neighbor path: grouped send/recv, then out = (x + sum r_j) / (k+1)
        // in one weighted_sum kernel.
        const size_t k = peers.recv.size();
        const double w = 1.0 / static_cast<double>(k + 1);
        const std::vector<double> weights(k, w);
        const std::vector<const void*> received(gpu.r().begin(), gpu.r().begin() + static_cast<long>(k));
        reference = [&, k, w, weights, received] {
          Ok(p, p->nccl_group_start(), "nccl_group_start");
          for (int dst : peers.send) Ok(p, p->nccl_send(x, bytes, dst, comm, stream), "nccl_send");
          for (size_t j = 0; j < k; ++j)
            Ok(p, p->nccl_recv(const_cast<void*>(received[j]), bytes, peers.recv[j], comm, stream), "nccl_recv");
          Ok(p, p->nccl_group_end(), "nccl_group_end");
          Ok(p, p->weighted_sum(y, x, w, received.data(), weights.data(), static_cast<int>(k), count, kFloat32, stream),
             "weighted_sum");
          Ok(p, p->stream_synchronize(stream), "stream_synchronize");
        };
      } else {
        reference = [&] {
          gpu.Staged(count, x, gpu.a(), gpu.c(), y, [&](size_t first, size_t k) {
            RawNeighborAverage(peers, gpu.a() + first, gpu.c() + first, scratch, static_cast<int>(k), true);
          });
        };
      }
    } else {  // combine: local, the same on both paths
      variant = "k=2 vs copy";
      reference = [&] {
        Ok(p, p->memcpy_async(y, x, bytes, stream), "memcpy_async");
        Ok(p, p->stream_synchronize(stream), "stream_synchronize");
      };
      starling = [&] {
        const void* r[2] = {gpu.r()[0], gpu.r()[1]};
        const double w[2] = {0.25, 0.25};
        Ok(p, p->weighted_sum(y, x, 0.5, r, w, 2, count, kFloat32, stream), "weighted_sum");
        Ok(p, p->stream_synchronize(stream), "stream_synchronize");
      };
    }
    if (op != "combine") SameResult(b, gpu, op, result_bytes, reference, starling, nccl);
    rows.push_back({op == "combine" ? "combine" : neighbor ? "neighbor_allreduce" : op, variant, b.size, bytes,
                    Compare(reference, starling, b.budget)});
    Progress(op == "combine" ? op : op + " (" + path + ")", bytes);
  }
  return rows;
}

// Rank 0: each family's figures against its target.
void PrintTargets(const std::vector<Row>& rows, bool nccl, bool emulated) {
  constexpr size_t kLarge = size_t{1} << 20;
  std::printf("\nAgainst the targets%s:\n",
              emulated ? " (EMULATED DEVICE: host memory and sockets, not GPU figures; a smoke test only)" : "");
  std::vector<std::string> seen;
  for (const Row& first : rows) {
    const std::string key = first.op + "|" + first.variant;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    double worst_large = 0, worst_small_diff = -1e300, worst_fraction = 1e300;
    bool any_large = false, any_small = false;
    for (const Row& r : rows) {
      if (r.op + "|" + r.variant != key) continue;
      const double ratio = r.pair.starling_seconds / r.pair.reference_seconds;
      const double diff_us = (r.pair.starling_seconds - r.pair.reference_seconds) * 1e6;
      if (r.bytes >= kLarge) {
        any_large = true;
        worst_large = std::max(worst_large, ratio);
        worst_fraction = std::min(worst_fraction, 2.0 * r.pair.reference_seconds / r.pair.starling_seconds);
      } else {
        any_small = true;
        worst_small_diff = std::max(worst_small_diff, diff_us);
      }
    }
    std::printf("  %-20s %-16s ", first.op.c_str(), first.variant.c_str());
    if (first.op == "combine") {
      // Bandwidth relative to the copy's: the kernel moves 4n floats, the copy 2n.
      if (any_large) {
        std::printf("from 1 MiB: kernel bandwidth >= %.0f%% of the copy's (target >= 70%%): %s\n",
                    100 * worst_fraction, worst_fraction >= 0.70 ? "met" : "NOT met");
      } else {
        std::printf("no size >= 1 MiB measured\n");
      }
      continue;
    }
    const double limit = nccl ? 1.10 : 1.15;
    if (any_large) {
      std::printf("from 1 MiB: worst ratio %.3f (target <= %.2f): %s", worst_large, limit,
                  worst_large <= limit ? "met" : "NOT met");
    } else {
      std::printf("no size >= 1 MiB measured");
    }
    if (nccl && any_small)
      std::printf("; below: worst +%.1f us (target <= +10 us): %s", worst_small_diff,
                  worst_small_diff <= 10.0 ? "met" : "NOT met");
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace

const std::vector<std::string>& GpuFamilies() {
  static const std::vector<std::string> families = {"allreduce", "broadcast", "reduce_scatter", "alltoall",
                                                    "neighbor_ring", "neighbor_exp2", "combine"};
  return families;
}

int RunGpu(BenchContext& b, const GpuOptions& options, const std::vector<size_t>& sizes) {
  const size_t max_bytes = sizes.empty() ? 4 : sizes.back();
  int local_rank = 0, first_failed = 0;
  Check(starling_local_rank(b.ctx, &local_rank), "local_rank");
  Gpu gpu;
  std::string why;
  if (gpu.Load(&why)) why = gpu.Prepare(b.rank, local_rank, max_bytes, options.chunk_bytes);
  if (!Everywhere(why.empty(), &first_failed)) {
    if (b.rank == first_failed) std::fprintf(stderr, "--device cuda: rank %d: %s\n", b.rank, why.c_str());
    return 1;
  }

  // The first Starling call on CUDA tensors chooses the context's path (collectively);
  // a path that cannot be had (STARLING_GPU_PATH=nccl with ranks sharing a GPU) fails
  // here on every rank, with the reason.
  int64_t one = 1;
  DLTensor in = gpu.Tensor(gpu.x(), &one), out = gpu.Tensor(gpu.y(), &one);
  if (starling_allreduce(b.ctx, &in, &out, STARLING_SUM, nullptr) != STARLING_SUCCESS) why = starling_last_error();
  if (!Everywhere(why.empty(), &first_failed)) {
    if (b.rank == first_failed) std::fprintf(stderr, "--device cuda: rank %d: %s\n", b.rank, why.c_str());
    return 1;
  }
  const char* path_text = "?";
  Check(starling_gpu_path(b.ctx, &path_text), "gpu_path");
  const bool nccl = std::strncmp(path_text, "nccl", 4) == 0;
  if (b.rank == 0) {
    std::printf("device: %s (rank 0 on device %d)%s\n", gpu.p()->describe(), gpu.device(),
                gpu.emulated() ? " -- EMULATED: the times below are not GPU figures" : "");
    std::printf("path:   %s\n", path_text);
    std::printf("reference: %s; staged chunk %zu bytes\n",
                nccl ? "raw NCCL through the plugin, own communicator and stream"
                     : "hand-written staging: memcpy_async to pinned memory, raw MPI per chunk, copy back",
                gpu.chunk_floats() * 4);
    std::fflush(stdout);
  }
  if (nccl) {
    why = gpu.InitNccl(b.rank, b.size);
    if (!why.empty()) {
      if (b.rank == 0) std::fprintf(stderr, "--device cuda: the NCCL reference: %s\n", why.c_str());
      return 1;
    }
  }

  std::vector<Row> rows;
  for (const std::string& op : options.ops) {
    const auto& families = GpuFamilies();
    if (std::find(families.begin(), families.end(), op) == families.end()) {
      if (b.rank == 0) std::fprintf(stderr, "unknown op '%s' for --device cuda\n", op.c_str());
      continue;
    }
    const std::vector<Row> more = RunFamily(b, gpu, op, nccl, sizes);
    ProgressEnd();  // one finished line per operation, in order
    rows.insert(rows.end(), more.begin(), more.end());
  }
  Report(rows, options.csv, "reference");
  if (b.rank == 0) {
    std::printf("(combine: reference = device-to-device copy of the output bytes, starling = weighted_sum kernel)\n");
    PrintTargets(rows, nccl, gpu.emulated());
  }
  return 0;
}

}  // namespace bench
