// The CUDA backend: device discovery (with a device-query kernel), the caching allocator,
// host<->device copies, fill, dtype conversion, the Philox random fills (the same stream as the
// CPU: core/philox.h is compiled for both) and the cuBLAS handle. The op kernels live in
// cuda_*.cu by family (cuda_backend.h lists them).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/backend.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

// ---- the device-query kernel: proves a kernel built for this GPU launches and runs ----
__global__ void device_query_kernel(int* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
#if defined(__CUDA_ARCH__)
    out[0] = __CUDA_ARCH__;
#else
    out[0] = -1;
#endif
    out[1] = warpSize;
  }
}

// ---- kernels ----
template <typename T>
__global__ void fill_kernel(T* out, int64_t n, T value) {
  for (int64_t i = cuda::first_index(); i < n; i += cuda::index_step()) out[i] = value;
}

template <typename S, typename D>
__global__ void cast_kernel(const S* in, D* out, int64_t n) {
  for (int64_t i = cuda::first_index(); i < n; i += cuda::index_step()) {
    out[i] = static_cast<D>(in[i]);
  }
}

// One thread per Philox block; mirrors backends/cpu/cpu_random.cpp exactly.
template <typename T>
__global__ void random_kernel(T* out, int64_t n, RandomStream rs, bool normal, double a, double b) {
  constexpr int64_t per_block = sizeof(T) == 4 ? 4 : 2;
  const int64_t blocks = (n + per_block - 1) / per_block;
  for (int64_t blk = cuda::first_index(); blk < blocks; blk += cuda::index_step()) {
    const philox::Block r =
        philox::random_block(rs.seed, rs.stream, rs.first_block + static_cast<uint64_t>(blk));
    double u[4] = {0, 0, 0, 0};
    if (sizeof(T) == 4) {
      for (int w = 0; w < 4; ++w) u[w] = philox::uniform_f32(r.v[w]);
    } else {
      u[0] = philox::uniform_f64(r.v[0], r.v[1]);
      u[1] = philox::uniform_f64(r.v[2], r.v[3]);
    }
    // The final a + x·y is one fused multiply-add (fma), exactly as backends/cpu/cpu_random.cpp
    // writes it: with the product and the sum rounded separately a float64 value could differ
    // from the CPU's in its last bit.
    double v[4];
    if (normal) {  // a = mean, b = stddev; Box-Muller in double
      for (int pair = 0; pair < per_block / 2; ++pair) {
        const double radius = sqrt(-2.0 * log(u[2 * pair]));
        const double theta = 2.0 * 3.14159265358979323846 * u[2 * pair + 1];
        v[2 * pair] = fma(b * radius, cos(theta), a);      // a + b·radius·cos θ
        v[2 * pair + 1] = fma(b * radius, sin(theta), a);  // a + b·radius·sin θ
      }
    } else {  // a = low, b = high
      for (int s = 0; s < 4; ++s) v[s] = fma(b - a, u[s], a);  // a + (b − a)·u
    }
    for (int64_t s = 0; s < per_block && blk * per_block + s < n; ++s) {
      out[blk * per_block + s] = static_cast<T>(v[s]);
    }
  }
}

using cuda::dispatch;
using cuda::dispatch_all;
using cuda::grid_for;
using cuda::kThreads;

}  // namespace

// ---- caching allocator: cudaMalloc only when the cache has no block that fits ----
// A block is reused for a request of at least half its size (sizes rounded up to 512 bytes).
// Everything runs on one stream, so a freed block may be handed out again at once: work
// queued on it before the free runs before work queued after.

void* CudaCachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = std::max<std::size_t>(512, (bytes + 511) / 512 * 512);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_.lower_bound(size);
  void* ptr = nullptr;
  std::size_t block = size;
  if (it != free_.end() && it->first <= 2 * size) {
    block = it->first;
    ptr = it->second;
    free_.erase(it);
    stats_.bytes_cached -= block;
    ++stats_.cache_hits;
  } else {
    if (cudaMalloc(&ptr, size) != cudaSuccess) {
      (void)cudaGetLastError();
      release_locked();  // give the cache back and try once more
      QKGRAD_CUDA_CHECK(cudaMalloc(&ptr, size));
    }
    ++stats_.system_allocations;
  }
  live_[ptr] = block;
  stats_.bytes_in_use += block;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CudaCachingAllocator::deallocate(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  stats_.bytes_in_use -= it->second;
  stats_.bytes_cached += it->second;
  free_.emplace(it->second, ptr);
  live_.erase(it);
}

AllocatorStats CudaCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CudaCachingAllocator::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_locked();
}

void CudaCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CudaCachingAllocator::release_locked() {
  for (auto& [size, ptr] : free_) cudaFree(ptr);
  free_.clear();
  stats_.bytes_cached = 0;
}

// ---- the backend ----

CudaBackend::CudaBackend() {
  QKGRAD_CUBLAS_CHECK(cublasCreate(&blas_));
  // The default stream (one stream for everything). CUBLAS_DEFAULT_MATH keeps float32 products
  // in full float32 (no TF32); TF32 tensor cores only when asked for (cuda_tf32_enabled).
  QKGRAD_CUBLAS_CHECK(cublasSetStream(blas_, nullptr));
  QKGRAD_CUBLAS_CHECK(cublasSetMathMode(
      blas_, cuda_tf32_enabled() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

bool cuda_tf32_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("QKGRAD_CUDA_TF32");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

void* CudaBackend::allocate(std::size_t bytes) { return allocator_.allocate(bytes); }
void CudaBackend::deallocate(void* ptr, std::size_t) { allocator_.deallocate(ptr); }
AllocatorStats CudaBackend::allocator_stats() const { return allocator_.stats(); }
// The CUDA attention kernels keep lse and recompute P in the backward (flash-style); P is made
// only when the caller wants it. rq and rk for qknorm.
AttentionState CudaBackend::attention_state(const AttentionSpec& s, DType dtype, bool want_probs) {
  AttentionState state;
  state.lse = Tensor::empty({s.batch, s.heads, s.tq}, dtype, Device::cuda);  // [B, H, tq]
  if (want_probs) state.probs = Tensor::empty({s.batch, s.heads, s.tq, s.tk}, dtype, Device::cuda);
  if (s.qknorm()) {
    state.rq = Tensor::empty({s.batch, s.heads, s.tq}, dtype, Device::cuda);  // [B, H, tq]
    state.rk = Tensor::empty({s.batch, s.heads, s.tk}, dtype, Device::cuda);  // [B, H, tk]
  }
  return state;
}

void CudaBackend::release_cached_memory() { allocator_.release(); }
void CudaBackend::reset_peak_memory() { allocator_.reset_peak(); }

void CudaBackend::copy_from_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) QKGRAD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void CudaBackend::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) QKGRAD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void CudaBackend::fill(Tensor& out, double value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_all(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(n), kThreads>>>(out.data<T>(), n, static_cast<T>(value));
  });
  QKGRAD_CUDA_LAUNCHED();
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.dtype() == dst.dtype()) {
    if (src.raw_data() != dst.raw_data()) {
      QKGRAD_CUDA_CHECK(cudaMemcpy(dst.raw_data(), src.raw_data(), src.nbytes(),
                                   cudaMemcpyDeviceToDevice));
    }
    return;
  }
  dispatch_all(src.dtype(), [&](auto s) {
    using S = decltype(s);
    dispatch_all(dst.dtype(), [&](auto d) {
      using D = decltype(d);
      cast_kernel<S, D><<<grid_for(n), kThreads>>>(src.data<S>(), dst.data<D>(), n);
    });
  });
  QKGRAD_CUDA_LAUNCHED();
}

namespace {

void launch_random(Tensor& out, RandomStream rs, bool normal, double a, double b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t blocks = static_cast<int64_t>(random_blocks_needed(out.dtype(), n));
  dispatch(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    random_kernel<T><<<grid_for(blocks), kThreads>>>(out.data<T>(), n, rs, normal, a, b);
  });
  QKGRAD_CUDA_LAUNCHED();
}

}  // namespace

void CudaBackend::fill_uniform(Tensor& out, double low, double high, RandomStream rs) {
  launch_random(out, rs, false, low, high);
}
void CudaBackend::fill_normal(Tensor& out, double mean, double stddev, RandomStream rs) {
  launch_random(out, rs, true, mean, stddev);
}

CudaInfo cuda_info() {
  CudaInfo info;
  info.built = true;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    info.summary = std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    return info;
  }
  info.device_count = count;
  if (count == 0) {
    info.summary = "no CUDA device found";
    return info;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    QKGRAD_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    info.summary += cat("cuda:", d, " ", prop.name, ", compute ", prop.major, ".", prop.minor, ", ",
                        prop.totalGlobalMem >> 20, " MiB, ", prop.multiProcessorCount, " SMs");
    if (d == 0) {  // launch the query kernel on the default device
      int* device_out = nullptr;
      int host_out[2] = {0, 0};
      QKGRAD_CUDA_CHECK(cudaMalloc(&device_out, sizeof host_out));
      device_query_kernel<<<1, 32>>>(device_out);
      const cudaError_t launch = cudaGetLastError();
      if (launch == cudaSuccess) {
        QKGRAD_CUDA_CHECK(cudaMemcpy(host_out, device_out, sizeof host_out, cudaMemcpyDeviceToHost));
        info.summary += cat(", kernel ran (code for sm_", host_out[0] / 10, ", warp ", host_out[1], ")");
      } else {
        info.summary += cat(", kernel launch failed: ", cudaGetErrorString(launch),
                            " (rebuild with -Dgpu_arch= matching this GPU)");
      }
      cudaFree(device_out);
    }
    info.summary += "\n";
  }
  return info;
}

Backend& cuda_backend() {
  static const bool ready = cuda_available();
  QKGRAD_CHECK(ready, "device cuda: ", cuda_info().summary,
               "; qkgrad was built with CUDA but this machine cannot run it (use the cpu)");
  static CudaBackend* instance = new CudaBackend;  // never destroyed (see backend.cpp)
  return *instance;
}

}  // namespace qkgrad
