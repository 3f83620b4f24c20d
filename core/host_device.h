// QKGRAD_HOST_DEVICE: marks a function that compiles for the host and, under nvcc, for the GPU
// too (__host__ __device__), so that one definition serves the CPU and the CUDA kernels
// (core/philox.h, core/unary_functions.h, core/row_functions.h).
#pragma once

#if defined(__CUDACC__)
#define QKGRAD_HOST_DEVICE __host__ __device__
#else
#define QKGRAD_HOST_DEVICE
#endif
