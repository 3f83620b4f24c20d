#include "training/device_flag.h"

#include "core/backend.h"

namespace qkgrad::training {

Device parse_device(const std::string& program, const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name != "cuda") throw UsageError(cat(program, ": --device must be cpu or cuda, got '", name, "'"));
  try {
    (void)backend(Device::cuda);  // throws, saying why, without CUDA support or without a GPU
  } catch (const Error& e) {
    throw UsageError(cat(program, ": ", e.what()));
  }
  return Device::cuda;
}

}  // namespace qkgrad::training
