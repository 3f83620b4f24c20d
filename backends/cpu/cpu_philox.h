// Philox4x32-10 for many consecutive blocks at once, written so the compiler vectorises it.
//
// core/philox.h computes one block at a time; dropout needs one 32-bit word per element, i.e.
// millions of blocks per training step. Here 16 blocks go through the ten rounds side by side
// (structure of arrays: lane l holds block first + base + l), which the compiler turns into
// vector multiplies. The words are exactly those of philox::random_block (tests check).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/philox.h"

namespace qkgrad::cpu {

// out[4·i + w] = word w of block first + i of (seed, stream), for i < count.
inline void philox_words(uint64_t seed, uint64_t stream, uint64_t first, int64_t count, uint32_t* out) {
  constexpr int kLanes = 16;
  for (int64_t base = 0; base < count; base += kLanes) {
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t block = first + static_cast<uint64_t>(base + l);
      c0[l] = static_cast<uint32_t>(block);
      c1[l] = static_cast<uint32_t>(block >> 32);
      c2[l] = static_cast<uint32_t>(stream);
      c3[l] = static_cast<uint32_t>(stream >> 32);
    }
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += philox::kW0;
        k1 += philox::kW1;
      }
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(philox::kM0) * c0[l];
        const uint64_t p1 = static_cast<uint64_t>(philox::kM1) * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = static_cast<uint32_t>(p1);
        c3[l] = static_cast<uint32_t>(p0);
        c0[l] = n0;
        c2[l] = n2;
      }
    }
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, count - base));
    for (int l = 0; l < lanes; ++l) {
      uint32_t* w = out + 4 * (base + l);
      w[0] = c0[l];
      w[1] = c1[l];
      w[2] = c2[l];
      w[3] = c3[l];
    }
  }
}

// The word of stream element `index` for a run of n consecutive elements starting there:
// words[j] = word of element index + j. `scratch` needs room for 4 · (n / 4 + 2) words.
inline const uint32_t* philox_element_words(uint64_t seed, uint64_t stream, uint64_t first_block, uint64_t index,
                                            int64_t n, uint32_t* scratch) {
  const uint64_t first = first_block + index / 4;
  const int64_t blocks = static_cast<int64_t>((index % 4 + static_cast<uint64_t>(n) + 3) / 4);
  philox_words(seed, stream, first, blocks, scratch);
  return scratch + index % 4;
}

}  // namespace qkgrad::cpu
