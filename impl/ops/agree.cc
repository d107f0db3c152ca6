#include "impl/ops/agree.h"

namespace starling::ops {

int DisseminationRounds(int p) {
  int rounds = 0;
  while ((1 << rounds) < p) ++rounds;
  return rounds;
}

void Agree(runtime::Context& context, const Signature& signature, const std::string& what) {
  const int p = context.size();
  const int r = context.rank();
  Agreement agreement(r, signature);
  Exchange ex(context, transport::Channel::kCollective, what);
  for (int k = 0, d = 1; k < DisseminationRounds(p); ++k, d <<= 1) {
    Header header;
    agreement.Stamp(&header);
    ex.SendFrame((r + d) % p, header, nullptr);
    const int frame = ex.RecvFrame((r - d + p) % p);
    ex.Wait();
    agreement.Check(ex.header(frame));
    ex.Clear();
  }
  agreement.ThrowIfPoisoned();
}

}  // namespace starling::ops
