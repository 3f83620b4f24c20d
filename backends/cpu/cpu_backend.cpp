#include "backends/cpu/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace qkgrad {

namespace {
// QKGRAD_CPU_CACHE_MB caps the memory the allocator keeps cached (default 8 GiB).
std::size_t cache_limit_from_env() {
  const char* env = std::getenv("QKGRAD_CPU_CACHE_MB");
  const long long mb = env ? std::atoll(env) : 8192;
  return static_cast<std::size_t>(mb > 0 ? mb : 0) << 20;
}
}  // namespace

CpuBackend::CpuBackend() : allocator_(cache_limit_from_env()) {}

void* CpuBackend::allocate(std::size_t bytes) { return allocator_.allocate(bytes); }
void CpuBackend::deallocate(void* ptr, std::size_t) { allocator_.deallocate(ptr); }
AllocatorStats CpuBackend::allocator_stats() const { return allocator_.stats(); }
void CpuBackend::release_cached_memory() { allocator_.release_cached(); }
void CpuBackend::reset_peak_memory() { allocator_.reset_peak(); }

void CpuBackend::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}

void set_num_threads(int threads) {
  QKGRAD_CHECK(threads >= 1, "set_num_threads: need at least 1 thread, got ", threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace qkgrad
