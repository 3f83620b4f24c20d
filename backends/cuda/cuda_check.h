// Every CUDA runtime and cuBLAS call goes through these checks: a failure throws qkgrad::Error
// naming the call, the file and the line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"

#define QKGRAD_CUDA_CHECK(call)                                                              \
  do {                                                                                       \
    const cudaError_t qkgrad_status = (call);                                                \
    if (qkgrad_status != cudaSuccess) {                                                      \
      ::qkgrad::fail(::qkgrad::cat("CUDA error at ", __FILE__, ":", __LINE__, ": ", #call,   \
                                   " failed: ", cudaGetErrorString(qkgrad_status)));         \
    }                                                                                        \
  } while (0)

#define QKGRAD_CUBLAS_CHECK(call)                                                            \
  do {                                                                                       \
    const cublasStatus_t qkgrad_status = (call);                                             \
    if (qkgrad_status != CUBLAS_STATUS_SUCCESS) {                                            \
      ::qkgrad::fail(::qkgrad::cat("cuBLAS error at ", __FILE__, ":", __LINE__, ": ", #call, \
                                   " failed with status ", static_cast<int>(qkgrad_status))); \
    }                                                                                        \
  } while (0)
