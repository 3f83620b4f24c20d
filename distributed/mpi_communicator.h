// The MPI communicator (Open MPI), built with -Dmpi: distributed/communicator.h's collectives
// over MPI_COMM_WORLD. Only communicator.cpp and the NCCL communicator include this.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace qkgrad::distributed {

#ifdef QKGRAD_HAVE_MPI
// Starts MPI (once per process; it is finalised when the communicator is destroyed) and returns
// the communicator of every rank the launcher started.
std::unique_ptr<Communicator> mpi_world();
#endif

}  // namespace qkgrad::distributed
