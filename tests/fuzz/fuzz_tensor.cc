// Fuzz target "tensor": DLPack descriptor validation (impl/common/tensor.cc) against the
// independent oracle of descriptor.h, in both directions: what breaks a rule is
// rejected, what follows every rule is accepted with exactly the oracle's byte range.
// Accepted ranges inside the arena are then written, so ASan checks them. No MPI.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "descriptor.h"
#include "impl/common/error.h"
#include "impl/common/tensor.h"

namespace {

using namespace starling_fuzz;
using starling::Code;

constexpr size_t kArenaBytes = 4096;

char* Arena() {
  static char* arena = new char[kArenaBytes]();  // on the heap: ASan poisons both ends
  return arena;
}

// Validates one descriptor; true with *view when the library accepts it.
bool Check(const Descriptor& d, starling::TensorView* view) {
  const Verdict v = Judge(d.tensor);
  try {
    *view = starling::ViewOf(&d.tensor, "in");
  } catch (const starling::Error& e) {
    if (v.must_accept) __builtin_trap();  // refused a valid descriptor
    if (e.code() != Code::kInvalidArgument && e.code() != Code::kUnsupported) __builtin_trap();
    if (std::strncmp(e.what(), "in", 2) != 0) __builtin_trap();  // the message names the tensor
    return false;
  }
  if (v.must_reject) __builtin_trap();  // accepted an invalid descriptor
  if (view->bytes != static_cast<size_t>(v.end - v.begin)) __builtin_trap();
  if (view->bytes > 0 && reinterpret_cast<uintptr_t>(view->data) != v.begin) __builtin_trap();
  if (view->numel > 0 && view->row_bytes() * static_cast<size_t>(view->first_dim()) != view->bytes) __builtin_trap();
  (void)view->Describe();
  (void)starling::TrailingShapeHash(*view);
  if (view->bytes > 0 && SafeToCall(v, Arena(), kArenaBytes)) std::memset(view->data, 0xa5, view->bytes);
  return true;
}

// The pairing rules must give a verdict (or InvalidArgument) for any two valid views.
template <typename F>
void ExpectArgumentCheck(F check) {
  try {
    check();
  } catch (const starling::Error& e) {
    if (e.code() != Code::kInvalidArgument) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  TensorRecipe recipes[2] = {};
  std::memcpy(recipes, data, std::min(size, sizeof recipes));
  Descriptor a, b;
  Build(recipes[0], Arena(), kArenaBytes, &a);
  Build(recipes[1], Arena(), kArenaBytes, &b);
  starling::TensorView va, vb;
  const bool accepted_a = Check(a, &va);
  const bool accepted_b = Check(b, &vb);
  if (accepted_a && accepted_b) {
    ExpectArgumentCheck([&] { starling::CheckInOut(va, vb, "in", "out"); });
    ExpectArgumentCheck([&] { starling::CheckSameLayout(va, vb, "in", "out"); });
  }
  return 0;
}
