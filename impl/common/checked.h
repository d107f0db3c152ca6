// Overflow-checked arithmetic for sizes that come from outside the library: tensor
// descriptors, counts and option structs from callers, and headers from peers. Every
// such product or sum goes through these, so a wrapped size can never reach memcpy,
// an allocation or a message length.
#pragma once

#include <cstddef>
#include <cstdint>

namespace starling {

// The largest byte size or address Starling accepts: pointer differences over a tensor
// stay defined, sizes fit in int64 (signatures, wire fields), and every user-space
// address of a 64-bit Linux process lies below it.
constexpr uint64_t kMaxBytes = static_cast<uint64_t>(PTRDIFF_MAX);

// *out = a * b (or a + b) when the exact result fits in *out's type; false otherwise,
// with *out unspecified. Operands of any integer types, negative ones included.
template <typename A, typename B, typename T>
[[nodiscard]] bool MulFits(A a, B b, T* out) {
  return !__builtin_mul_overflow(a, b, out);
}
template <typename A, typename B, typename T>
[[nodiscard]] bool AddFits(A a, B b, T* out) {
  return !__builtin_add_overflow(a, b, out);
}

// a * b when it fits and is at most kMaxBytes, else false.
template <typename A, typename B>
[[nodiscard]] bool BytesFit(A a, B b, uint64_t* out) {
  return MulFits(a, b, out) && *out <= kMaxBytes;
}

}  // namespace starling
