#include "distributed/communicator.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "distributed/mpi_communicator.h"
#include "distributed/nccl_communicator.h"

namespace qkgrad::distributed {

namespace {

// Already done: a sum over one rank is the buffer itself.
class DoneSum final : public PendingSum {
 public:
  bool poll() override { return true; }
  void wait() override {}
};

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }
  std::unique_ptr<PendingSum> start_sum(Tensor) override { return std::make_unique<DoneSum>(); }
  void sum(std::vector<double>&) override {}
  void broadcast(std::string&, int) override {}
  void barrier() override {}
  [[noreturn]] void abort_job(int status) override { std::exit(status); }
};

// The first of these variables the environment sets, as a positive number (0 if none).
int env_count(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    if (*end == '\0' && n > 0 && n < 1000000) return static_cast<int>(n);
  }
  return 0;
}

}  // namespace

void Communicator::broadcast(std::vector<double>& values, int root) {
  std::string bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  broadcast(bytes, root);
  QKGRAD_CHECK(bytes.size() == values.size() * sizeof(double), "broadcast: rank ", root, " sent ", bytes.size(),
               " bytes where ", values.size(), " numbers were expected: the ranks are not running the same step");
  std::memcpy(values.data(), bytes.data(), bytes.size());
}

std::unique_ptr<Communicator> single_process() { return std::make_unique<SingleProcess>(); }

// Open MPI's mpirun sets OMPI_COMM_WORLD_*; MPICH's and Slurm's launchers PMI_* and PMIX_*.
int launched_ranks() {
  const int n = env_count({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"});
  return n > 0 ? n : 1;
}

int launched_local_ranks() {
  const int n = env_count({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"});
  return n > 0 ? n : 1;
}

int launched_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return std::atoi(value);
  }
  return 0;
}

std::unique_ptr<Communicator> gradient_communicator(Device device, Communicator& world) {
#ifdef QKGRAD_HAVE_NCCL
  if (device == Device::cuda && world.size() > 1) return nccl_over(world);
#else
  (void)device;
  (void)world;
#endif
  return nullptr;
}

bool built_with_mpi() {
#ifdef QKGRAD_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool built_with_nccl() {
#ifdef QKGRAD_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> from_launcher() {
  const bool launched = env_count({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "PMIX_RANK", "PMI_RANK"}) > 0 ||
                        std::getenv("OMPI_COMM_WORLD_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr;
  if (!launched) return single_process();
#ifdef QKGRAD_HAVE_MPI
#ifdef QKGRAD_HAVE_NCCL
  choose_local_gpu();  // before anything touches CUDA
#endif
  return mpi_world();
#else
  QKGRAD_CHECK(launched_ranks() == 1, "this process was started by an MPI launcher as one of ", launched_ranks(),
               " ranks, but this qkgrad was built without MPI: install libopenmpi-dev and rebuild (meson setup "
               "--reconfigure build -Dmpi=enabled), or run without mpirun");
  return single_process();
#endif
}

}  // namespace qkgrad::distributed
