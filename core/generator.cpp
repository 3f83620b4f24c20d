#include "core/generator.h"

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "core/philox.h"

namespace qkgrad {

uint32_t Generator::next_u32() {
  return philox::random_block(seed_, stream_, reserve_blocks(1)).v[0];
}

double Generator::next_uniform() {
  const philox::Block b = philox::random_block(seed_, stream_, reserve_blocks(1));
  return philox::uniform_f64(b.v[0], b.v[1]);
}

double Generator::next_normal() {
  // Box-Muller on the two doubles of one block; the second normal is discarded so that the
  // generator state stays a single counter.
  const philox::Block b = philox::random_block(seed_, stream_, reserve_blocks(1));
  const double u1 = philox::uniform_f64(b.v[0], b.v[1]);
  const double u2 = philox::uniform_f64(b.v[2], b.v[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t Generator::next_below(uint64_t bound) {
  QKGRAD_CHECK(bound > 0, "Generator::next_below: bound must be > 0");
  // Rejection sampling on 64 bits keeps the result exactly uniform.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    const philox::Block b = philox::random_block(seed_, stream_, reserve_blocks(1));
    const uint64_t x = (static_cast<uint64_t>(b.v[0]) << 32) | b.v[1];
    if (x < limit) return x % bound;
  }
}

}  // namespace qkgrad
