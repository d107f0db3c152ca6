// Writes the seed corpus of the fuzz targets: real headers, frames and descriptors,
// laid out by the same structs the harnesses read. Usage: starling_fuzz_seeds <dir>
// (writes <dir>/<target>/<seed>). The committed corpus (tests/fuzz/corpus) came from it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <starling/starling.h>

#include "capi_recipe.h"
#include "impl/transport/shm/board.h"
#include "impl/transport/shm/mailbox.h"
#include "impl/transport/shm/offers.h"
#include "impl/windows/slots.h"
#include "impl/windows/protocol.h"
#include "wire_recipe.h"

namespace {

using namespace starling_fuzz;
using namespace starling::ops;

std::string g_dir;

void Write(const std::string& target, const std::string& name, const std::vector<char>& bytes) {
  const std::string dir = g_dir + "/" + target;
  mkdir(g_dir.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::perror(name.c_str());
  if (f) std::fclose(f);
}

template <typename T>
void Append(std::vector<char>* out, const T& value) {
  const char* p = reinterpret_cast<const char*>(&value);
  out->insert(out->end(), p, p + sizeof value);
}

// ---- wire: the receiver's recipe, then a message as it arrives.
Signature AllgatherSignature() {
  Signature sig;
  sig.seq = 3;
  sig.kind = OpKind::kAllgather;
  sig.dtype = 2;
  sig.count = 8;  // bytes per row
  sig.chunk = 1 << 20;
  return sig;
}

std::vector<char> WireSeed(const Header& h, const std::vector<char>& payload, int gather_count = 0) {
  WireRecipe r = {};
  r.mine = AllgatherSignature();
  r.rank = 1;
  r.gather_count = gather_count;
  r.row_bytes = 8;
  std::vector<char> out;
  Append(&out, r);
  Header inline_header = h;
  if (inline_header.flags & kFlagPayloadInline) inline_header.payload_bytes = payload.size();
  Append(&out, inline_header);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void WireSeeds() {
  Header agree;
  agree.sender = 0;
  agree.sig = AllgatherSignature();
  agree.flags = kFlagPayloadInline;
  Write("wire", "agreement", WireSeed(agree, {}));
  Header poisoned = agree;
  poisoned.flags |= kFlagPoisoned;
  poisoned.culprit_a = 2;
  poisoned.culprit_b = 3;
  poisoned.culprit_sig_a = agree.sig;
  poisoned.culprit_sig_b = agree.sig;
  poisoned.culprit_sig_b.count = 12;
  Write("wire", "poisoned", WireSeed(poisoned, {}));
  Header streamed = agree;
  streamed.flags = 0;
  streamed.payload_bytes = 1 << 20;
  streamed.chunk = 1 << 18;
  Write("wire", "streamed_payload", WireSeed(streamed, {}));

  // allgather metadata: rank 0 with 2 rows inline, rank 3 streamed later.
  std::vector<char> gather;
  Append(&gather, GatherMeta{0, 1, 2, 5});
  Append(&gather, GatherMeta{3, 0, 3, 5});
  gather.insert(gather.end(), 16, 'r');
  Write("wire", "allgather_blocks", WireSeed(agree, gather, 2));

  // neighbor frame: two segments packed after their table, and one whose data follows.
  Header neighbor;
  neighbor.flags = kFlagPayloadInline;
  neighbor.sig.kind = OpKind::kNeighborFrame;
  neighbor.sig.count = 2;
  neighbor.sig.chunk = 1;
  SegmentInfo a, b;
  a.seq = 7;
  a.kind = OpKind::kNeighborAllreduce;
  a.dtype = 2;
  a.count = 2;
  a.bytes = 8;
  b = a;
  b.seq = 8;
  b.weight = 0.5;
  std::vector<char> table;
  Append(&table, a);
  Append(&table, b);
  std::vector<char> packed = table;
  packed.insert(packed.end(), 16, 'd');
  Write("wire", "neighbor_packed", WireSeed(neighbor, packed));
  neighbor.aux = 16;
  neighbor.sig.chunk = 16;
  Write("wire", "neighbor_streamed", WireSeed(neighbor, table));

  std::vector<char> truncated = WireSeed(agree, {});
  truncated.resize(sizeof(WireRecipe) + 10);
  Write("wire", "truncated", truncated);
}

// ---- tensor and capi: descriptors over the harness arena.
TensorRecipe Vector(int64_t n, uint16_t data_offset = 0) {
  TensorRecipe t = {};
  t.device_type = kDLCPU;
  t.dtype_code = kDLFloat;
  t.dtype_bits = 32;
  t.dtype_lanes = 1;
  t.ndim = 1;
  t.data_offset = data_offset;
  t.shape[0] = n;
  return t;
}

TensorRecipe Matrix(int64_t rows, int64_t cols, uint16_t data_offset, bool strides) {
  TensorRecipe t = Vector(rows, data_offset);
  t.ndim = 2;
  t.shape[1] = cols;
  if (strides) {
    t.flags |= kHasStrides;
    t.strides[0] = cols;
    t.strides[1] = 1;
  }
  return t;
}

std::vector<TensorRecipe> NotableDescriptors() {
  std::vector<TensorRecipe> all = {Vector(16), Matrix(4, 4, 64, true), Vector(int64_t{1} << 61), Vector(-4),
                                   Matrix(0, INT64_MAX, 0, false), Matrix(4, 4, 0, false)};
  TensorRecipe offset = Vector(4);
  offset.byte_offset = uint64_t{1} << 63;
  all.push_back(offset);
  TensorRecipe deep = Vector(1);
  deep.ndim = 65;
  all.push_back(deep);
  TensorRecipe reversed = Vector(8);
  reversed.flags |= kHasStrides;
  reversed.strides[0] = -1;
  all.push_back(reversed);
  return all;
}

void TensorSeeds() {
  const std::vector<TensorRecipe> all = NotableDescriptors();
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<char> seed;
    Append(&seed, all[i]);
    Append(&seed, all[(i + 1) % all.size()]);
    Write("tensor", "pair_" + std::to_string(i), seed);
  }
}

void CapiSeeds() {
  for (int e = 0; e < kNumEntries; ++e) {
    CallRecipe r = {};
    r.entry = static_cast<uint8_t>(e);
    r.in = Vector(16);
    r.out = Vector(16, 256);
    r.weights[0] = r.weights[1] = 0.5;
    r.small = 1;  // a one-rank topology
    r.args.struct_size = sizeof(starling_neighbor_args_t);
    r.args.self_weight = 0.5;
    if (e == kContextCreate) r.args.struct_size = sizeof(starling_context_options_t);
    if (e == kStats) r.args.struct_size = sizeof(starling_stats_t);
    if (e == kPeerStats) r.args.struct_size = sizeof(starling_peer_stats_t);
    if (e == kProbePeers) {
      r.args.struct_size = sizeof(starling_probe_args_t);
      r.value = 2;  // repetitions
      r.args.num_sources = 1;  // count
    }
    std::vector<char> seed;
    Append(&seed, r);
    Write("capi", "entry_" + std::to_string(e), seed);
    r.flags = kNonblocking | kInPlace;
    r.in = Vector(int64_t{1} << 61);
    seed.clear();
    Append(&seed, r);
    Write("capi", "entry_" + std::to_string(e) + "_overflow", seed);
  }
}

// ---- window: a 4-byte source rank, then a request as the service receives it.
void WindowSeeds() {
  using starling::windows::WindowOp;
  using starling::windows::WindowRequest;
  auto seed = [](const WindowRequest& r) {
    std::vector<char> out;
    Append(&out, r.sender);
    Append(&out, r);
    return out;
  };
  WindowRequest put;
  put.op = WindowOp::kPut;
  put.window_id = 3;
  put.sender = 1;
  put.bytes = 4096;
  put.chunk = 4096;
  put.weight = 0.5;
  Write("window", "put", seed(put));
  WindowRequest accumulate = put;
  accumulate.op = WindowOp::kAccumulate;
  accumulate.flags = starling::windows::kRequestHasP | starling::windows::kRequestRequireMutex;
  accumulate.p = 0.25;
  accumulate.bytes = uint64_t{3} << 30;  // three whole messages
  accumulate.chunk = uint32_t{1} << 30;
  Write("window", "accumulate_large", seed(accumulate));
  WindowRequest get;
  get.op = WindowOp::kGet;
  get.sender = 2;
  Write("window", "get", seed(get));
  WindowRequest mutex = get;
  mutex.op = WindowOp::kMutexAcquire;
  Write("window", "mutex", seed(mutex));
}

// ---- mailbox: a reader byte, then a formatted region with versions published.
void MailboxSeeds() {
  using starling::transport::shm::Mailbox;
  using starling::transport::shm::WaitPolicy;
  for (uint32_t readers : {1u, 3u}) {
    for (uint32_t versions : {0u, 1u, 2u}) {
      const size_t bytes = Mailbox::RegionBytes(readers, 64);
      std::vector<char> region(bytes + 128, 0);
      char* base = region.data() + (128 - reinterpret_cast<uintptr_t>(region.data()) % 128) % 128;
      Mailbox box = Mailbox::Format(base, bytes, readers, 64);
      for (uint32_t v = 1; v <= versions; ++v) {
        std::memset(box.BeginWrite(WaitPolicy{}, nullptr), static_cast<int>(v), 64);
        box.Publish(48 + v);
      }
      std::vector<char> seed(1, 1);
      seed.insert(seed.end(), base, base + bytes);
      Write("mailbox", "readers" + std::to_string(readers) + "_versions" + std::to_string(versions), seed);
    }
  }
}

// ---- board: a peer's board after real rounds between two boards (two threads): the
// start of its region, then its slot 1 and slot 2 headers (fuzz_board.cc's layout).
void BoardSeeds() {
  using starling::transport::shm::Board;
  for (int rounds : {1, 2, 5}) {
    std::vector<std::vector<char>> regions(2, std::vector<char>(Board::SegmentBytes() + 128, 0));
    std::vector<char*> bases;
    for (auto& r : regions) {
      char* base = r.data() + (128 - reinterpret_cast<uintptr_t>(r.data()) % 128) % 128;
      Board::Format(base);
      bases.push_back(base);
    }
    auto run = [&](int rank) {
      Board board(rank, bases);
      starling::transport::shm::WaitPolicy policy;
      policy.timeout_seconds = 10;
      unsigned char tag[Board::kTagBytes] = {};
      const char payload[24] = {1, 2, 3};
      for (int k = 0; k < rounds; ++k) board.Round(tag, k % 2 ? nullptr : payload, sizeof payload, policy, nullptr);
    };
    std::thread other(run, 1);
    run(0);
    other.join();
    const char* peer = bases[1];
    std::vector<char> seed(peer, peer + 512);
    for (uint32_t s = 1; s <= 2; ++s) seed.insert(seed.end(), peer + Board::SlotOffset(s), peer + Board::SlotOffset(s) + 128);
    Write("board", "rounds" + std::to_string(rounds), seed);
  }
}

// ---- window_slots: window id, origin, tensor bytes (2 bytes), then the payload of a
// real shared slot area (made in a temporary directory standing in for /dev/shm).
void WindowSlotsSeeds() {
  using starling::windows::SlotArea;
  char dir[] = "/tmp/starling-seeds-XXXXXX";
  if (mkdtemp(dir) == nullptr) return;
  starling::transport::shm::SegmentOptions options;
  options.directory = dir;
  int n = 0;
  for (size_t tensor_bytes : {size_t{0}, size_t{24}, size_t{300}}) {
    for (const std::vector<int>& origins : {std::vector<int>{1}, std::vector<int>{1, 3, 7}}) {
      // Readers: none, or some ranks that also put and one that only gets.
      const std::vector<int> readers = origins.size() == 1 ? std::vector<int>{} : std::vector<int>{2, 3};
      std::vector<float> initial(tensor_bytes / 4 + 1, 1.5f);
      SlotArea area = SlotArea::Share("/seed-" + std::to_string(n), 5, 0, origins, readers, tensor_bytes,
                                      initial.data(), 0x7f0000001000ull, options);
      std::vector<char> seed = {5, static_cast<char>(origins.back()), static_cast<char>(tensor_bytes & 0xff),
                                static_cast<char>(tensor_bytes >> 8)};
      seed.insert(seed.end(), area.region(), area.region() + area.region_bytes());
      Write("window_slots", "slots" + std::to_string(origins.size()) + "_bytes" + std::to_string(tensor_bytes), seed);
      if (!readers.empty()) {
        seed[1] = 2;  // the reader that has no slot
        Write("window_slots", "reader_bytes" + std::to_string(tensor_bytes), seed);
      }
      ++n;
    }
  }
  rmdir(dir);
}

// ---- offers: action, offer number, piece size and address (0: a buffer of the
// harness), then a ring whose slot holds the offer in each phase (the word's layout is
// offers.cc's: number << 3 | phase, phases 1 offered .. 6 withdrawn).
void OffersSeeds() {
  using starling::transport::shm::OfferRing;
  using starling::transport::shm::kOfferSlots;
  const uint32_t number = 13;
  for (uint32_t phase = 0; phase <= 6; ++phase) {
    for (char action = 0; action < 3; ++action) {
      std::vector<char> seed = {action};
      Append(&seed, number);
      Append(&seed, uint16_t{200});
      Append(&seed, uint64_t{0});
      void* memory = std::aligned_alloc(alignof(OfferRing), sizeof(OfferRing));
      auto* r = new (memory) OfferRing{};
      r->slots[number % kOfferSlots].value.store((number << 3) | phase);
      r->readable.store(1);
      const char* bytes = static_cast<const char*>(memory);
      seed.insert(seed.end(), bytes, bytes + sizeof(OfferRing));
      std::free(memory);
      Write("offers", "phase" + std::to_string(phase) + "_action" + std::to_string(int{action}), seed);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  WireSeeds();
  TensorSeeds();
  CapiSeeds();
  MailboxSeeds();
  BoardSeeds();
  WindowSeeds();
  WindowSlotsSeeds();
  OffersSeeds();
  return 0;
}
