// The one hash of qkgrad's fingerprints: 64-bit FNV-1a (a corpus and the parameters compared
// across data-parallel ranks, a subword vocabulary named in checkpoints). Not cryptographic: it
// tells accidental differences apart, which is all a fingerprint here is for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace qkgrad {

constexpr uint64_t kFnv1aStart = 14695981039346656037ull;  // the offset basis

// The bytes hashed on from `hash` (kFnv1aStart: a new hash): each byte XORed in, then the
// product with the FNV prime 2^40 + 2^8 + 0xb3. (One signature only: a pointer-and-size
// overload would silently take fnv1a("text", hash) for a pointer and a size.)
inline uint64_t fnv1a(std::string_view bytes, uint64_t hash = kFnv1aStart) {
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

// 16 hexadecimal digits (as text: a JSON number holds only 53 bits).
inline std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace qkgrad
