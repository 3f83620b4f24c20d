// A caching allocator for host memory.
//
// A training step allocates the same tensors every step. Asking the system each time costs a
// malloc/free and, for large blocks, fresh zeroed pages from the kernel (page faults on first
// touch). Instead, freed blocks are kept in a size-sorted free list and handed out again: a
// request takes the smallest cached block that is at least as big and at most twice as big.
// In steady state a training loop makes no system allocations at all (tests/test_allocator.cpp).
// Blocks of 1 MiB and more are mapped from the kernel, so that the memory of a block the cache
// drops goes back to the system (cpu_allocator.cpp says why malloc's heap would keep it).
#pragma once

// Under AddressSanitizer every block comes from malloc, whose ASan version checks each access;
// a block mapped from the kernel would be invisible to it.
#if defined(__SANITIZE_ADDRESS__)
#define QKGRAD_MAP_LARGE_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QKGRAD_MAP_LARGE_BLOCKS 0
#endif
#endif
#ifndef QKGRAD_MAP_LARGE_BLOCKS
#define QKGRAD_MAP_LARGE_BLOCKS 1
#endif

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"

namespace qkgrad {

class CpuCachingAllocator {
 public:
  // cache_limit_bytes: cached (free) memory above this is returned to the system.
  explicit CpuCachingAllocator(std::size_t cache_limit_bytes);
  ~CpuCachingAllocator();

  void* allocate(std::size_t bytes);  // 64-byte aligned (one cache line, one AVX-512 vector)
  void deallocate(void* ptr);
  AllocatorStats stats() const;
  void release_cached();
  void reset_peak();

 private:
  void trim_to(std::size_t limit);  // caller holds mutex_

  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_blocks_;      // size -> block
  std::unordered_map<void*, std::size_t> live_sizes_;  // block -> its real size
  AllocatorStats stats_;
  std::size_t cache_limit_;
};

}  // namespace qkgrad
