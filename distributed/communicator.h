// The processes of a data-parallel job and the collectives training needs: an in-place sum of
// a gradient buffer (started without waiting, so that backward can go on), and a few small
// host-side exchanges (broadcast, sums of scalars, barrier).
//
// Implementations (docs/distributed.md):
//   single_process()  one process, every collective is the identity (a run without mpirun);
//   MPI               distributed/mpi_communicator.cpp, when built with -Dmpi and started by
//                     mpirun (Open MPI, Debian's libopenmpi-dev);
//   NCCL              distributed/nccl_communicator.cpp, for gradients on CUDA devices (MPI
//                     starts the job and hands out NCCL's id).
//
// Determinism: every sum sees the ranks' values in rank order (0 + 1 + ... + N-1), computed
// once and sent to all, so every rank holds the same bits and the same N gives the same bits
// from run to run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qkgrad::distributed {

// A sum in flight (Communicator::start_sum). poll() moves it on without blocking and says
// whether it is done; wait() blocks until it is. The buffer must stay alive and untouched
// until then.
class PendingSum {
 public:
  virtual ~PendingSum() = default;
  virtual bool poll() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool is_root() const { return rank() == 0; }
  // "single process", "MPI (Open MPI v4.1.4), 2 ranks", ...
  virtual std::string describe() const = 0;

  // buffer (a contiguous f32 or f64 tensor) := the sum of every rank's buffer, in place.
  virtual std::unique_ptr<PendingSum> start_sum(Tensor buffer) = 0;
  void sum(Tensor buffer) { start_sum(std::move(buffer))->wait(); }

  // Small host-side exchanges, blocking. values := the element-wise sum over ranks (rank order).
  virtual void sum(std::vector<double>& values) = 0;
  // bytes := root's bytes on every rank.
  virtual void broadcast(std::string& bytes, int root) = 0;
  void broadcast(std::vector<double>& values, int root);
  virtual void barrier() = 0;

  // Ends the whole job now with this exit status (after an error on one rank, so that the
  // others do not wait for it forever).
  [[noreturn]] virtual void abort_job(int status) = 0;
};

// One process: rank 0 of 1.
std::unique_ptr<Communicator> single_process();

// The communicator this process was started for: MPI when a launcher (mpirun) started it as one
// of several ranks, else single_process(). Refuses (naming what to do) when a launcher started
// several ranks but this build has no MPI.
std::unique_ptr<Communicator> from_launcher();

// What the launcher's environment says, without starting MPI: the number of ranks in the job
// (1 without a launcher) and the number of them on this machine.
int launched_ranks();
int launched_local_ranks();
int launched_local_rank();  // this rank's index among those on this machine (0 without a launcher)

// The communicator for the gradients of a model on `device`, when it should not be `world`
// itself: NCCL's for CUDA devices in a build with NCCL (device buffers summed without a copy to
// the host). nullptr: use `world`.
std::unique_ptr<Communicator> gradient_communicator(Device device, Communicator& world);

// Whether this build has MPI (-Dmpi) and NCCL.
bool built_with_mpi();
bool built_with_nccl();

}  // namespace qkgrad::distributed
