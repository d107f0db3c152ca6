#include "impl/compress/state.h"

#include "impl/common/error.h"

namespace starling::compress {
namespace {

std::string ShapeText(DType dtype, const std::vector<int64_t>& shape) {
  std::string s = Str(DTypeName(dtype), "[");
  for (size_t i = 0; i < shape.size(); ++i) s += Str(i ? ", " : "", shape[i]);
  return s + "]";
}

std::string RanksText(const std::vector<int>& ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i) s += Str(i ? ", " : "", ranks[i]);
  return s + "}";
}

}  // namespace

std::shared_ptr<TensorState> StateStore::Register(const std::string& name, const TensorState& identity) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<TensorState>& slot = states_[name];
  if (!slot) {
    slot = std::make_shared<TensorState>();
    slot->use = identity.use;
    slot->dtype = identity.dtype;
    slot->shape = identity.shape;
    slot->kind = identity.kind;
    slot->k = identity.k;
    slot->sources = identity.sources;
    return slot;
  }
  const TensorState& s = *slot;
  const char* hint = "; use another name, or drop the old state with starling_compression_reset";
  STARLING_CHECK_ARG(s.use == identity.use, "compression state '", name, "' belongs to ",
                     s.use == Use::kChoco ? "a compressed neighbor_allreduce" : "a compressed allreduce", hint);
  STARLING_CHECK_ARG(s.dtype == identity.dtype && s.shape == identity.shape, "compression state '", name,
                     "' was created for ", ShapeText(s.dtype, s.shape), " but this call passes ",
                     ShapeText(identity.dtype, identity.shape), hint);
  STARLING_CHECK_ARG(s.kind == identity.kind && s.k == identity.k, "compression state '", name,
                     "' was created with ", KindName(s.kind), " (k=", s.k, ") but this call uses ",
                     KindName(identity.kind), " (k=", identity.k, ")", hint);
  STARLING_CHECK_ARG(s.sources == identity.sources, "CHOCO state '", name, "' holds copies of in-neighbors ",
                     RanksText(s.sources), " but this call receives from ", RanksText(identity.sources),
                     " (the topology changed)", hint, " on every rank");
  return slot;
}

void StateStore::Reset(const std::string& name, bool all) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (all)
    states_.clear();
  else
    states_.erase(name);
}

}  // namespace starling::compress
