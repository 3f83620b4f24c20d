// The CPU caching allocator: freed blocks are reused, and a training-like loop reaches a steady
// state that makes no system allocations.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "core/tensor.h"
#include "ops/ops.h"

using namespace qkgrad;

TEST_CASE("a freed block is handed out again", "[allocator]") {
  Backend& cpu = backend(Device::cpu);
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000, 37});
    first = t.raw_data();
  }
  const AllocatorStats before = cpu.allocator_stats();
  Tensor again = Tensor::empty({1000, 37});
  const AllocatorStats after = cpu.allocator_stats();
  CHECK(again.raw_data() == first);
  CHECK(after.cache_hits == before.cache_hits + 1);
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(reinterpret_cast<uintptr_t>(again.raw_data()) % 64 == 0);
}

TEST_CASE("a repeated forward/backward step reaches zero system allocations", "[allocator]") {
  Generator gen(5);
  Tensor w = Tensor::randn({64, 32}, gen);
  w.requires_grad_();
  const Tensor x = Tensor::randn({128, 64}, gen);
  auto step = [&] {
    const Tensor loss = mean(tanh(matmul(x, w)) * 2.0);
    w.zero_grad();
    loss.backward();
  };
  step();
  step();
  const AllocatorStats warm = backend(Device::cpu).allocator_stats();
  for (int i = 0; i < 5; ++i) step();
  const AllocatorStats later = backend(Device::cpu).allocator_stats();
  CHECK(later.system_allocations == warm.system_allocations);
  CHECK(later.cache_hits > warm.cache_hits);
}

TEST_CASE("release_cached_memory empties the cache", "[allocator]") {
  { Tensor t = Tensor::empty({4096}); }
  Backend& cpu = backend(Device::cpu);
  CHECK(cpu.allocator_stats().bytes_cached > 0);
  cpu.release_cached_memory();
  CHECK(cpu.allocator_stats().bytes_cached == 0);
}
