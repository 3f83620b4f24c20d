// Data-parallel gradients: sums the parameters' gradients over the ranks while backward still
// runs, as PyTorch's DistributedDataParallel and Marian do.
//
// The parameters, in reverse order (roughly the order in which backward finishes them), are cut
// into buckets of about bucket_bytes. autograd calls hook() for each parameter as soon as its
// gradient is final (core/autograd.h, backward(root, seed, hook)); when every gradient of a
// bucket is final, the bucket is copied into one flat buffer and its sum over the ranks starts
// (Communicator::start_sum), overlapping with the rest of backward. Buckets start in bucket
// order only, so that every rank issues the same collectives in the same order whatever its
// data. finish() starts what is left (a parameter no backward reached adds zeros), waits for
// every sum and writes the sums back into the gradients.
//
//   GradientReducer reducer(comm, model.parameters());
//   loss.backward(seed, reducer.hook());  ...  reducer.finish();  // then clip, optimizer step
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/autograd.h"
#include "distributed/communicator.h"

namespace qkgrad::distributed {

class GradientReducer {
 public:
  static constexpr std::size_t kDefaultBucketBytes = std::size_t{4} << 20;  // 4 MiB

  GradientReducer(Communicator& comm, std::vector<Tensor> params, std::size_t bucket_bytes = kDefaultBucketBytes);

  // For backward(root, seed, hook) on the last backward of a step (earlier micro-batches of
  // --accumulate run without it: their gradients simply add up first).
  LeafGradHook hook();
  // Starts the buckets not yet started, waits for all, writes the summed gradients back.
  void finish();

  std::size_t buckets() const { return buckets_.size(); }
  // Seconds finish() spent waiting in its last call: the communication backward did not hide.
  double last_wait_seconds() const { return last_wait_seconds_; }

 private:
  struct Bucket {
    std::vector<std::size_t> params;  // indices into params_
    int64_t numel = 0;
    Tensor flat;                      // [numel], on the parameters' device
    std::size_t final_count = 0;      // how many of its gradients are final this step
    std::unique_ptr<PendingSum> pending;
  };
  void mark_final(const Tensor& leaf);
  void start_ready_buckets(bool everything);
  void pack(Bucket& b);
  void unpack(Bucket& b);

  Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const TensorImpl*, std::size_t> index_of_;  // a parameter's index in params_
  std::vector<std::size_t> bucket_of_;  // per parameter
  std::vector<bool> final_;             // per parameter, this step
  std::size_t next_to_start_ = 0;   // buckets below it have started this step
  double last_wait_seconds_ = 0;
};

}  // namespace qkgrad::distributed
