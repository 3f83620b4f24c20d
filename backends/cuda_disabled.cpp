// Compiled when qkgrad is built without CUDA (the default): the cuda device exists in the API
// but every use explains how to get it.
#include "core/backend.h"
#include "core/error.h"

namespace qkgrad {

Backend& cuda_backend() {
  fail("device cuda: qkgrad was built without CUDA support; reconfigure with "
       "`meson setup build -Dcuda=true` on a machine with nvcc");
}

CudaInfo cuda_info() {
  CudaInfo info;
  info.summary = "qkgrad was built without CUDA (meson option -Dcuda=true)";
  return info;
}

}  // namespace qkgrad
