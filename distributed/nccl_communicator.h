// Gradient sums over NCCL, for a data-parallel job whose gradients live on CUDA devices: built
// when the CUDA build finds NCCL (nccl.h and libnccl; Debian has none, the CUDA toolkit and
// PyTorch's wheels carry it) and MPI, which starts the job and hands NCCL its id. Only
// communicator.cpp includes this.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace qkgrad::distributed {

#ifdef QKGRAD_HAVE_NCCL
// Each rank on a machine takes its own GPU (local rank modulo the GPUs there), before anything
// touches CUDA.
void choose_local_gpu();
// NCCL's sums for CUDA buffers; everything else (CPU buffers, the host exchanges) goes to `host`.
std::unique_ptr<Communicator> nccl_over(Communicator& host);
#endif

}  // namespace qkgrad::distributed
