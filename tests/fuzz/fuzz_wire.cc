// Fuzz target "wire": what a peer can send, as it arrives (impl/ops/wire.cc): frame
// headers (ValidateFrameHeader, as Exchange::ProgressFrame uses it), the agreement on
// signatures, neighbor frame tables and allgather metadata. A corrupted or truncated
// message must give a description, never a crash, an over-read (the message is copied
// into a buffer of its exact size, so ASan sees any) or a payload that does not add up.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "impl/common/error.h"
#include "impl/ops/wire.h"
#include "wire_recipe.h"

namespace {

using namespace starling::ops;

volatile unsigned char g_sink;  // keeps the reads below from being optimized away

void Touch(const char* data, uint64_t bytes) {
  unsigned char sum = 0;
  for (uint64_t i = 0; i < bytes; ++i) sum ^= static_cast<unsigned char>(data[i]);
  g_sink = sum;
}

void CheckHeader(const Header& h, size_t length) {
  if (h.flags & kFlagPayloadInline) {
    if (h.payload_bytes != length - sizeof(Header)) __builtin_trap();
  } else if (length != sizeof(Header) || h.payload_bytes > kMaxFramePayload || h.chunk < 1 ||
             h.chunk > kMaxMessageBytes) {
    __builtin_trap();
  }
}

void CheckAgreement(const starling_fuzz::WireRecipe& r, const Header& h) {
  Agreement agreement(r.rank, r.mine);
  const bool agrees = agreement.Check(h);
  if (agrees != (!(h.flags & kFlagPoisoned) && h.sig == r.mine)) __builtin_trap();
  Header out;
  agreement.Stamp(&out);
  if (out.sig != r.mine || out.sender != r.rank || ((out.flags & kFlagPoisoned) != 0) == agrees) __builtin_trap();
  try {
    agreement.ThrowIfPoisoned();
    if (!agrees) __builtin_trap();
  } catch (const starling::Error& e) {
    if (agrees || e.code() != starling::Code::kMismatch) __builtin_trap();
  }
}

void CheckNeighborTable(const Header& h, const char* payload) {
  NeighborTable table;
  if (!ParseNeighborTable(h, payload, &table).empty()) return;
  uint64_t data_bytes = 0;
  for (const SegmentInfo& e : table.entries) data_bytes += e.bytes;
  if (table.entries.size() != static_cast<uint64_t>(h.sig.count)) __builtin_trap();
  if (table.packed) {
    if (table.table_bytes + data_bytes != h.payload_bytes) __builtin_trap();
    Touch(payload + table.table_bytes, data_bytes);  // the segments' data, as NeighborExchange reads it
  } else if (data_bytes != h.aux || table.table_bytes != h.payload_bytes) {
    __builtin_trap();
  }
}

void CheckGatherBlocks(const starling_fuzz::WireRecipe& r, const Header& h, const char* payload) {
  std::vector<GatherBlock> blocks;
  if (!UnpackGatherBlocks(payload, h.payload_bytes, r.gather_count, r.row_bytes, &blocks).empty()) return;
  if (blocks.size() != static_cast<size_t>(r.gather_count)) __builtin_trap();
  for (const GatherBlock& b : blocks) {
    if (b.meta.has_data) Touch(b.data, static_cast<uint64_t>(b.meta.first_dim) * r.row_bytes);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  starling_fuzz::WireRecipe recipe = {};
  std::memcpy(&recipe, data, std::min(size, sizeof recipe));
  const size_t skip = std::min(size, sizeof recipe);
  const std::vector<char> message(data + skip, data + size);  // exactly the bytes that arrived
  Header h;
  if (!ValidateFrameHeader(message.data(), message.size(), &h).empty()) return 0;
  CheckHeader(h, message.size());
  CheckAgreement(recipe, h);
  if (h.flags & kFlagPayloadInline) {
    const char* payload = message.data() + sizeof(Header);
    CheckNeighborTable(h, payload);
    CheckGatherBlocks(recipe, h, payload);
  }
  return 0;
}
