#include "backends/cpu/cpu_backend.h"

#include <omp.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

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

CpuBackend::CpuBackend() : allocator_(cache_limit_from_env()) {
  // Subnormal floats (below 1.2e-38 in f32) cost 10-100x a normal operation on x86, and they
  // appear naturally in softmax tails and attention probabilities as a model grows confident.
  // Flush them to zero, as most training frameworks' fast paths do. The OpenMP and OpenBLAS
  // worker threads inherit this floating-point mode from the thread that creates them, so it is
  // set before the first parallel region. QKGRAD_FLUSH_DENORMALS=0 keeps IEEE subnormals.
  const char* env = std::getenv("QKGRAD_FLUSH_DENORMALS");
  set_flush_denormals(!(env && std::string(env) == "0"));
}

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

void set_flush_denormals(bool on) {
#if defined(__SSE__)
  const unsigned flags = 0x8040;  // FTZ (bit 15) | DAZ (bit 6) of MXCSR
  _mm_setcsr(on ? (_mm_getcsr() | flags) : (_mm_getcsr() & ~flags));
#else
  (void)on;
#endif
}

bool flush_denormals() {
#if defined(__SSE__)
  return (_mm_getcsr() & 0x8040) == 0x8040;
#else
  return false;
#endif
}

void set_num_threads(int threads) {
  QKGRAD_CHECK(threads >= 1, "set_num_threads: need at least 1 thread, got ", threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace qkgrad
