// The CPU caching allocator: freed blocks are reused, and a training-like loop reaches a steady
// state that makes no system allocations.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "backends/cpu/cpu_allocator.h"
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

namespace {
// This process's resident memory in bytes (/proc/self/statm: pages).
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}
}  // namespace

TEST_CASE("the memory of a dropped large block goes back to the system", "[allocator]") {
  if (!QKGRAD_MAP_LARGE_BLOCKS) {
    WARN("skipped: under AddressSanitizer every block comes from its malloc, which keeps freed memory");
    return;
  }
  // 8 blocks of 4 MiB, each followed by a small live block: in a malloc heap the small blocks
  // would pin the large ones' memory after they are freed (glibc serves blocks up to 32 MB from
  // its heap once a large free has raised its mmap threshold).
  constexpr std::size_t kBlock = std::size_t{4} << 20;
  // As in a long run: a large free raises that threshold (volatile: the pair is not optimised away).
  void* volatile raise = std::malloc(std::size_t{30} << 20);
  std::free(raise);
  CpuCachingAllocator allocator(std::size_t{1} << 30);
  std::vector<void*> large, small;
  const std::size_t before = resident_bytes();
  for (int i = 0; i < 8; ++i) {
    large.push_back(allocator.allocate(kBlock));
    std::memset(large.back(), 1, kBlock);  // touch every page
    small.push_back(allocator.allocate(256));
  }
  const std::size_t touched = resident_bytes();
  REQUIRE(touched >= before + 30 * (std::size_t{1} << 20));
  for (void* block : large) allocator.deallocate(block);
  CHECK(resident_bytes() >= touched - (std::size_t{2} << 20));  // cached: still ours
  allocator.release_cached();
  CHECK(resident_bytes() <= touched - 30 * (std::size_t{1} << 20));
  for (void* block : small) allocator.deallocate(block);
}
