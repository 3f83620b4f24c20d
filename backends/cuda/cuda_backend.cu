// The CUDA backend, first slice: device discovery (with a device-query kernel), a caching
// allocator, host<->device copies, fill, dtype conversion and the Philox random fills (the same
// stream as the CPU: core/philox.h is compiled for both). The op kernels arrive with the CUDA
// backend issue; until then Backend's defaults throw a clear "not implemented on cuda" Error.
#include <cuda_runtime.h>

#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/backend.h"
#include "backends/cuda/cuda_check.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

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
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

template <typename S, typename D>
__global__ void cast_kernel(const S* in, D* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<D>(in[i]);
}

// One thread per Philox block; mirrors backends/cpu/cpu_random.cpp exactly.
template <typename T>
__global__ void random_kernel(T* out, int64_t n, RandomStream rs, bool normal, double a, double b) {
  constexpr int64_t per_block = sizeof(T) == 4 ? 4 : 2;
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (blk * per_block >= n) return;
  const philox::Block r = philox::random_block(rs.seed, rs.stream, rs.first_block + static_cast<uint64_t>(blk));
  double u[4] = {0, 0, 0, 0};
  if (sizeof(T) == 4) {
    for (int w = 0; w < 4; ++w) u[w] = philox::uniform_f32(r.v[w]);
  } else {
    u[0] = philox::uniform_f64(r.v[0], r.v[1]);
    u[1] = philox::uniform_f64(r.v[2], r.v[3]);
  }
  double v[4];
  if (normal) {  // a = mean, b = stddev; Box-Muller in double
    for (int pair = 0; pair < per_block / 2; ++pair) {
      const double radius = sqrt(-2.0 * log(u[2 * pair]));
      const double theta = 2.0 * 3.14159265358979323846 * u[2 * pair + 1];
      v[2 * pair] = a + b * radius * cos(theta);
      v[2 * pair + 1] = a + b * radius * sin(theta);
    }
  } else {  // a = low, b = high
    for (int s = 0; s < 4; ++s) v[s] = a + (b - a) * u[s];
  }
  for (int64_t s = 0; s < per_block && blk * per_block + s < n; ++s) out[blk * per_block + s] = static_cast<T>(v[s]);
}

template <typename Fn>
void dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) fn(float{});
  else if (dtype == DType::f64) fn(double{});
  else fail("internal error: a floating-point cuda kernel was called on an i64 tensor");
}

template <typename Fn>
void dispatch_all(DType dtype, Fn&& fn) {
  if (dtype == DType::i64) fn(int64_t{});
  else dispatch(dtype, fn);
}

// ---- caching allocator: cudaMalloc only when the cache has no block that fits ----
class CudaCachingAllocator {
 public:
  void* allocate(std::size_t bytes) {
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
  void deallocate(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    stats_.bytes_in_use -= it->second;
    stats_.bytes_cached += it->second;
    free_.emplace(it->second, ptr);
    live_.erase(it);
  }
  AllocatorStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_locked();
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  void release_locked() {
    for (auto& [size, ptr] : free_) cudaFree(ptr);
    free_.clear();
    stats_.bytes_cached = 0;
  }
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  std::unordered_map<void*, std::size_t> live_;
  AllocatorStats stats_;
};

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::cuda; }

  void* allocate(std::size_t bytes) override { return allocator_.allocate(bytes); }
  void deallocate(void* ptr, std::size_t) override { allocator_.deallocate(ptr); }
  AllocatorStats allocator_stats() const override { return allocator_.stats(); }
  void release_cached_memory() override { allocator_.release(); }
  void reset_peak_memory() override { allocator_.reset_peak(); }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) QKGRAD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) QKGRAD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }

  void fill(Tensor& out, double value) override {
    const int64_t n = out.numel();
    if (n == 0) return;
    dispatch_all(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      fill_kernel<T><<<blocks_for(n), kThreads>>>(out.data<T>(), n, static_cast<T>(value));
    });
    QKGRAD_CUDA_CHECK(cudaGetLastError());
  }

  void copy(const Tensor& src, Tensor& dst) override {
    const int64_t n = src.numel();
    if (n == 0) return;
    if (src.dtype() == dst.dtype()) {
      QKGRAD_CUDA_CHECK(cudaMemcpy(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice));
      return;
    }
    dispatch_all(src.dtype(), [&](auto s) {
      using S = decltype(s);
      dispatch_all(dst.dtype(), [&](auto d) {
        using D = decltype(d);
        cast_kernel<S, D><<<blocks_for(n), kThreads>>>(src.data<S>(), dst.data<D>(), n);
      });
    });
    QKGRAD_CUDA_CHECK(cudaGetLastError());
  }

  void fill_uniform(Tensor& out, double low, double high, RandomStream rs) override {
    launch_random(out, rs, false, low, high);
  }
  void fill_normal(Tensor& out, double mean, double stddev, RandomStream rs) override {
    launch_random(out, rs, true, mean, stddev);
  }

 private:
  void launch_random(Tensor& out, RandomStream rs, bool normal, double a, double b) {
    const int64_t n = out.numel();
    if (n == 0) return;
    const int64_t blocks = static_cast<int64_t>(random_blocks_needed(out.dtype(), n));
    dispatch(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      random_kernel<T><<<blocks_for(blocks), kThreads>>>(out.data<T>(), n, rs, normal, a, b);
    });
    QKGRAD_CUDA_CHECK(cudaGetLastError());
  }

  CudaCachingAllocator allocator_;
};

}  // namespace

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
