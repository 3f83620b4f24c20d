// Generator: a seed plus a position in the Philox stream (core/philox.h).
//
// Kernels that draw random numbers reserve a run of blocks from the generator and compute each
// element from (seed, stream, block index): the numbers depend only on the seed and the order of
// draws, never on thread count or device. Saving (seed, stream, offset) saves the whole state.
#pragma once

#include <cstdint>

namespace qkgrad {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  uint64_t offset() const { return offset_; }  // blocks used so far
  void set_offset(uint64_t offset) { offset_ = offset; }

  // Reserves `count` consecutive blocks and returns the index of the first one.
  uint64_t reserve_blocks(uint64_t count) {
    const uint64_t first = offset_;
    offset_ += count;
    return first;
  }

  // Host-side draws (data shuffling, dataset generation). Each uses one fresh block.
  uint32_t next_u32();
  double next_uniform();                // in (0, 1)
  double next_normal();                 // standard normal
  uint64_t next_below(uint64_t bound);  // uniform integer in [0, bound), bound > 0

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t offset_ = 0;
};

}  // namespace qkgrad
