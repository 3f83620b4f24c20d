// Which backend serves each device: backends/cpu for the CPU, backends/cuda (or, without
// -Dcuda=true, cuda_disabled.cpp) for CUDA. core/backend.h declares backend(Device); this layer,
// which has the devices, defines it.
#include "core/backend.h"

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

namespace qkgrad {

Backend& cuda_backend();  // backends/cuda/cuda_backend.cu, or cuda_disabled.cpp

Backend& backend(Device device) {
  if (device == Device::cpu) {
    // Never destroyed: a tensor in a global or static variable may free its storage after
    // every other static object is gone.
    static CpuBackend* cpu = new CpuBackend;
    return *cpu;
  }
  return cuda_backend();
}

std::string device_summary(Device device) {
  if (device != Device::cpu) return std::string(device_name(device));
  const int threads = num_threads();
  return cat("cpu, ", threads, threads == 1 ? " thread" : " threads");
}

bool cuda_available() {
  const CudaInfo info = cuda_info();
  return info.built && info.device_count > 0;
}

}  // namespace qkgrad
