#include "impl/ops/agree.h"

#include <cstring>

namespace starling::ops {

int DisseminationRounds(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

void Agree(runtime::Context& context, const Group& group, const Signature& signature, const LazyText& what) {
  Agreement agreement(context.rank(), signature);
  Exchange ex(context, transport::Channel::kCollective, what);
  for (int k = 0, d = 1; k < DisseminationRounds(group.size()); ++k, d <<= 1) {
    Header header;
    agreement.Stamp(&header);
    ex.SendFrame(group.peer(d), header, nullptr);
    const int frame = ex.RecvFrame(group.peer(-d));
    ex.Wait();
    agreement.Check(ex.header(frame));
    ex.Clear();
  }
  agreement.ThrowIfPoisoned();
}

std::vector<const char*> DisseminationGather(runtime::Context& context, const Group& group,
                                             const Signature& signature, const void* mine, size_t bytes,
                                             Exchange& ex) {
  // Before round k member i knows the contributions of i, i - 1, ..., i - 2^k + 1
  // (known[j] is member i - j's); it sends the ones i + 2^k lacks.
  const int n = group.size();
  Agreement agreement(context.rank(), signature);
  std::vector<const char*> known{static_cast<const char*>(mine)};
  for (int k = 0, d = 1; k < DisseminationRounds(n); ++k, d <<= 1) {
    const size_t count = std::min<size_t>(std::min(d, n - d), known.size());
    runtime::ScratchPool::Buffer packed = context.scratch().Get(count * bytes);
    if (bytes > 0)  // empty contributions may come with a NULL pointer
      for (size_t i = 0; i < count; ++i) std::memcpy(packed.data() + i * bytes, known[i], bytes);
    Header header;
    agreement.Stamp(&header);
    header.payload_bytes = count * bytes;
    ex.SendFrame(group.peer(d), header, packed.data());
    const int frame = ex.RecvFrame(group.peer(-d));
    ex.Wait();
    const Header& h = ex.header(frame);
    const size_t incoming = static_cast<size_t>(std::min(d, n - d));
    if (agreement.Check(h) && h.payload_bytes == incoming * bytes) {
      for (size_t i = 0; i < incoming; ++i) known.push_back(ex.payload(frame) + i * bytes);
    }
  }
  agreement.ThrowIfPoisoned();
  STARLING_CHECK(static_cast<int>(known.size()) == n, Code::kInternal, "gathered ", known.size(), " of ", n,
                 " contributions");
  std::vector<const char*> by_position(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) by_position[static_cast<size_t>(((group.index - j) % n + n) % n)] = known[j];
  return by_position;
}

}  // namespace starling::ops
