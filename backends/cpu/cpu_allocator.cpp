#include "backends/cpu/cpu_allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "core/error.h"

namespace qkgrad {

namespace {
constexpr std::size_t kAlignment = 64;

std::size_t round_up(std::size_t bytes) {
  return std::max<std::size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

// Blocks of 1 MiB and more come from the kernel (mmap, page-aligned) and go back to it when the
// cache drops them. Through malloc they would stay in its heap: glibc raises its own mmap
// threshold to up to 32 MB after the first large free, and blocks freed in the middle of the
// heap are never returned, so over a long run with batches of many shapes the heap only grows
// (a paper-size translation run's process passed 10 GB within half an hour, and still grew; with
// this it holds the tensors in use plus at most the cache's cap: 8-9 GB there).
constexpr std::size_t kMapThreshold = QKGRAD_MAP_LARGE_BLOCKS ? std::size_t{1} << 20 : SIZE_MAX;

void* system_allocate(std::size_t size) {
  if (size < kMapThreshold) return std::aligned_alloc(kAlignment, size);
  void* block = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return block == MAP_FAILED ? nullptr : block;
}

void system_free(void* block, std::size_t size) {
  if (size < kMapThreshold) {
    std::free(block);
  } else {
    munmap(block, size);
  }
}
}  // namespace

CpuCachingAllocator::CpuCachingAllocator(std::size_t cache_limit_bytes)
    : cache_limit_(cache_limit_bytes) {}

CpuCachingAllocator::~CpuCachingAllocator() { release_cached(); }

void* CpuCachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = round_up(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* block = nullptr;
  std::size_t block_size = size;
  auto it = free_blocks_.lower_bound(size);
  if (it != free_blocks_.end() && it->first <= 2 * size) {
    block_size = it->first;
    block = it->second;
    free_blocks_.erase(it);
    stats_.bytes_cached -= block_size;
    ++stats_.cache_hits;
  } else {
    block = system_allocate(size);
    if (block == nullptr) {
      // Out of memory: give the cache back to the system and try once more.
      trim_to(0);
      block = system_allocate(size);
    }
    QKGRAD_CHECK(block != nullptr, "cpu allocator: out of memory allocating ", size,
                 " bytes (", stats_.bytes_in_use, " bytes in use); use smaller batches");
    ++stats_.system_allocations;
  }
  live_sizes_[block] = block_size;
  stats_.bytes_in_use += block_size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return block;
}

void CpuCachingAllocator::deallocate(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_sizes_.find(ptr);
  if (it == live_sizes_.end()) return;  // not ours; cannot happen through Storage
  const std::size_t size = it->second;
  live_sizes_.erase(it);
  stats_.bytes_in_use -= size;
  free_blocks_.emplace(size, ptr);
  stats_.bytes_cached += size;
  if (stats_.bytes_cached > cache_limit_) trim_to(cache_limit_ / 2);
}

void CpuCachingAllocator::trim_to(std::size_t limit) {
  // Free the largest blocks first: they hold the most memory per system call.
  while (stats_.bytes_cached > limit && !free_blocks_.empty()) {
    auto last = std::prev(free_blocks_.end());
    stats_.bytes_cached -= last->first;
    system_free(last->second, last->first);
    free_blocks_.erase(last);
  }
}

AllocatorStats CpuCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CpuCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CpuCachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  trim_to(0);
}

}  // namespace qkgrad
