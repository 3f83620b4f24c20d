// distributed/nccl_communicator.h: ncclAllReduce on the CUDA backend's stream (the default
// stream, backends/cuda/cuda_backend.h), so that the sum runs after the kernels that wrote the
// gradients and before those that read them, with no copy to the host.
//
// Determinism: NCCL's ring (or tree) allreduce adds the ranks' values in an order fixed by the
// number of ranks, the topology and the NCCL version, and every rank receives the same bits;
// the same job on the same machines reproduces its sums.
#include "distributed/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace qkgrad::distributed {

namespace {

void check_nccl(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return;
  fail(cat("NCCL: ", what, " failed: ", ncclGetErrorString(result),
           " (did another rank die? NCCL_DEBUG=WARN says more). The job stops; continue it with --resume"));
}

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  fail(cat("NCCL communicator: ", what, " failed: ", cudaGetErrorString(status)));
}

ncclDataType_t nccl_type(DType dtype) {
  if (dtype == DType::f32) return ncclFloat32;
  if (dtype == DType::f64) return ncclFloat64;
  fail(cat("distributed sum: a ", dtype_name(dtype), " buffer; only f32 and f64 buffers are summed"));
}

// One ncclAllReduce in place, queued on the default stream; an event says when it is done.
class NcclSum final : public PendingSum {
 public:
  NcclSum(ncclComm_t comm, Tensor buffer) : buffer_(std::move(buffer)) {
    check_nccl(ncclAllReduce(buffer_.raw_data(), buffer_.raw_data(), static_cast<std::size_t>(buffer_.numel()),
                             nccl_type(buffer_.dtype()), ncclSum, comm, /*stream=*/nullptr),
               "ncclAllReduce of a gradient bucket");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done_, nullptr), "cudaEventRecord");
    buffer_.mark_written();
  }
  ~NcclSum() override { cudaEventDestroy(done_); }
  bool poll() override { return cudaEventQuery(done_) == cudaSuccess; }
  void wait() override { check_cuda(cudaEventSynchronize(done_), "waiting for ncclAllReduce"); }

 private:
  Tensor buffer_;
  cudaEvent_t done_ = nullptr;
};

class NcclWorld final : public Communicator {
 public:
  explicit NcclWorld(Communicator& host) : host_(host) {
    ncclUniqueId id{};
    if (host_.is_root()) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::string bytes(reinterpret_cast<const char*>(&id), sizeof id);
    host_.broadcast(bytes, 0);  // rank 0's id, over MPI
    std::memcpy(&id, bytes.data(), sizeof id);
    check_nccl(ncclCommInitRank(&comm_, host_.size(), id, host_.rank()), "ncclCommInitRank");
    int version = 0;
    ncclGetVersion(&version);
    version_ = cat(version / 10000, ".", version / 100 % 100, ".", version % 100);
  }
  ~NcclWorld() override { ncclCommDestroy(comm_); }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string describe() const override { return cat("NCCL ", version_, " over ", host_.describe()); }
  std::unique_ptr<PendingSum> start_sum(Tensor buffer) override {
    if (buffer.device() != Device::cuda) return host_.start_sum(std::move(buffer));
    return std::make_unique<NcclSum>(comm_, std::move(buffer));
  }
  void sum(std::vector<double>& values) override { host_.sum(values); }
  void broadcast(std::string& bytes, int root) override { host_.broadcast(bytes, root); }
  void barrier() override { host_.barrier(); }
  [[noreturn]] void abort_job(int status) override {
    host_.abort_job(status);
    std::_Exit(status);  // (abort_job does not return)
  }

 private:
  Communicator& host_;
  ncclComm_t comm_ = nullptr;
  std::string version_;
};

}  // namespace

void choose_local_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return;  // no GPU: the CPU runs
  check_cuda(cudaSetDevice((launched_local_rank()) % count), "cudaSetDevice");
}

std::unique_ptr<Communicator> nccl_over(Communicator& host) { return std::make_unique<NcclWorld>(host); }

}  // namespace qkgrad::distributed
