// Philox4x32-10, the counter-based random number generator of Salmon et al. (SC'11,
// "Parallel random numbers: as easy as 1, 2, 3").
//
// A counter-based generator is a pure function: random block = philox(counter, key). There is no
// hidden state, so element i of a random tensor can be computed by any thread, on the CPU or on
// the GPU, and comes out the same. This header is compiled by both g++ and nvcc.
//
// qkgrad's random stream (used by every random kernel):
//   key     = the 64-bit seed                       {lo32(seed), hi32(seed)}
//   counter = {lo32(block), hi32(block), lo32(stream), hi32(stream)}
// where `block` is a 64-bit block index and `stream` separates independent uses of one seed
// (parameter init, dropout, data order, ...). Each block yields four 32-bit words.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace qkgrad::philox {

struct Block {
  uint32_t v[4];
};

// Round constants from the paper: multipliers M and Weyl key increments W.
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

QKGRAD_HOST_DEVICE inline Block philox4x32_10(Block ctr, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key schedule: bump the key before every round but the first
      key0 += kW0;
      key1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = Block{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
  }
  return ctr;
}

// Block number `block` of stream `stream` under `seed`.
QKGRAD_HOST_DEVICE inline Block random_block(uint64_t seed, uint64_t stream, uint64_t block) {
  const Block ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                   static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// 23 random bits -> a float in the open interval (0, 1): (k + 1/2)·2⁻²³ is exact in float, so
// it is never 0 (log(u) is finite) and never rounds up to 1.
QKGRAD_HOST_DEVICE inline float uniform_f32(uint32_t bits) {
  return (static_cast<float>(bits >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

// 52 random bits from two words -> a double in (0, 1), exact for the same reason.
QKGRAD_HOST_DEVICE inline double uniform_f64(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 12;
  return (static_cast<double>(bits) + 0.5) * (1.0 / 4503599627370496.0);
}

}  // namespace qkgrad::philox
