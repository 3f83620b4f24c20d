// A caching allocator for host memory.
//
// A training step allocates the same tensors every step. Asking the system each time costs a
// malloc/free and, for large blocks, fresh zeroed pages from the kernel (page faults on first
// touch). Instead, freed blocks are kept in a size-sorted free list and handed out again: a
// request takes the smallest cached block that is at least as big and at most twice as big.
// In steady state a training loop makes no system allocations at all (tests/test_allocator.cpp).
#pragma once

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
