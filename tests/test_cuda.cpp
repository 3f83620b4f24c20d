// The CUDA backend's first slice. Skips (with a message) without a CUDA build or a GPU.
#include <catch2/catch.hpp>

#include "backends/backend.h"
#include "core/tensor.h"

using namespace qkgrad;

namespace {
bool skip_without_gpu() {
  if (cuda_available()) return false;
  WARN("CUDA test skipped: " << cuda_info().summary);
  return true;
}
}  // namespace

TEST_CASE("cuda: device query reports the GPU and a kernel runs", "[cuda]") {
  if (skip_without_gpu()) return;
  const CudaInfo info = cuda_info();
  CHECK(info.device_count >= 1);
  CHECK(info.summary.find("kernel ran") != std::string::npos);
}

TEST_CASE("cuda: host <-> device round trip, fill and dtype conversion", "[cuda]") {
  if (skip_without_gpu()) return;
  const Tensor host = Tensor::arange(1000, DType::f64);
  const Tensor dev = host.to(Device::cuda);
  CHECK(dev.device() == Device::cuda);
  CHECK(dev.to(Device::cpu).to_vector() == host.to_vector());
  CHECK(dev.to(DType::f32).to(Device::cpu).to_vector() == host.to_vector());
  CHECK(Tensor::full({3}, 2.5, DType::f32, Device::cuda).to_vector() == std::vector<double>{2.5, 2.5, 2.5});
}

TEST_CASE("cuda: random tensors equal the CPU's for the same seed", "[cuda]") {
  if (skip_without_gpu()) return;
  for (DType dtype : {DType::f32, DType::f64}) {
    Generator g_cpu(9), g_gpu(9);
    CHECK(Tensor::uniform({1001}, -1, 1, g_cpu, dtype).to_vector() ==
          Tensor::uniform({1001}, -1, 1, g_gpu, dtype, Device::cuda).to_vector());
    const auto a = Tensor::randn({1001}, g_cpu, dtype).to_vector();
    const auto b = Tensor::randn({1001}, g_gpu, dtype, Device::cuda).to_vector();
    // Box-Muller runs in double on both sides; libm and CUDA's log/sin/cos may differ in
    // the last bit of a double, which almost never survives rounding.
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-12));
  }
}
