// distributed/communicator.h over MPI (built with -Dmpi; Open MPI from Debian's libopenmpi-dev).
#include "distributed/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "core/backend.h"
#include "core/error.h"

namespace qkgrad::distributed {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  fail(cat("MPI: ", what, " failed: ", std::string(text, static_cast<std::size_t>(length)),
           " (did another rank die, or the network between them fail?). The job stops; continue it with --resume"));
}

MPI_Datatype mpi_type(DType dtype) {
  if (dtype == DType::f32) return MPI_FLOAT;
  if (dtype == DType::f64) return MPI_DOUBLE;
  fail(cat("distributed sum: a ", dtype_name(dtype), " buffer; only f32 and f64 buffers are summed"));
}

// The sum of one buffer over N ranks in two steps, each one MPI collective that runs while the
// caller goes on (MPI_Ialltoall, MPI_Iallgather):
//   1. reduce-scatter: the buffer is cut into N chunks; rank r receives chunk r of every rank
//      and adds them up in rank order, x_0 + x_1 + ... + x_{N-1};
//   2. all-gather: every rank receives every summed chunk.
// Per step each rank sends and receives (N-1)/N of the buffer, as in a ring allreduce; the
// order of the additions is fixed, and every rank ends with the same bits.
//
// MPI matches collectives by the order in which each rank starts them on a communicator, so
// that order must be the same on every rank whatever the timing. The all-to-alls start in the
// order the caller starts the sums (bucket order, on one communicator); the all-gathers start
// on a second communicator, each only after every earlier sum has started its own (SumQueue).
class StagingPool;  // below

class MpiSum {
 public:
  MpiSum(MPI_Comm scatter, MPI_Comm gather, int ranks, Tensor buffer, StagingPool& pool);
  ~MpiSum();
  MpiSum(const MpiSum&) = delete;
  MpiSum& operator=(const MpiSum&) = delete;

  int step() const { return step_; }  // 1: reduce-scatter in flight, 2: all-gather in flight, 3: done
  // Finishes the current step if MPI has (block: waits for it); true if it moved on.
  bool advance(bool block);

 private:
  void start_gather();
  void write_back();
  template <typename T>
  void add_chunks();

  MPI_Comm gather_;
  int ranks_;
  Tensor buffer_;
  StagingPool& pool_;
  MPI_Datatype type_;
  std::size_t elem_ = 0;
  int64_t chunk_ = 0;
  std::vector<std::byte> send_, received_, summed_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int step_ = 1;
};

// Staging memory for the sums, kept from step to step: the buckets have the same sizes every
// step, so after the first one no sum allocates (or page-faults in fresh memory).
class StagingPool {
 public:
  std::vector<std::byte> take(std::size_t bytes) {
    std::vector<std::vector<std::byte>>& spare = spare_[bytes];
    if (spare.empty()) return std::vector<std::byte>(bytes);
    std::vector<std::byte> v = std::move(spare.back());
    spare.pop_back();
    return v;
  }
  void give_back(std::vector<std::byte> v) {
    if (!v.empty()) spare_[v.size()].push_back(std::move(v));
  }

 private:
  std::map<std::size_t, std::vector<std::vector<std::byte>>> spare_;
};

MpiSum::MpiSum(MPI_Comm scatter, MPI_Comm gather, int ranks, Tensor buffer, StagingPool& pool)
    : gather_(gather), ranks_(ranks), buffer_(std::move(buffer)), pool_(pool), type_(mpi_type(buffer_.dtype())) {
  QKGRAD_CHECK(buffer_.numel() > 0, "distributed sum: an empty buffer");
  elem_ = dtype_size(buffer_.dtype());
  chunk_ = (buffer_.numel() + ranks_ - 1) / ranks_;
  QKGRAD_CHECK(chunk_ <= INT32_MAX, "distributed sum: a buffer of ", buffer_.numel(), " elements is too large for one MPI message");
  const std::size_t padded = static_cast<std::size_t>(chunk_ * ranks_) * elem_;
  send_ = pool_.take(padded);
  received_ = pool_.take(padded);
  summed_ = pool_.take(static_cast<std::size_t>(chunk_) * elem_);
  if (buffer_.device() == Device::cpu) {
    std::memcpy(send_.data(), buffer_.raw_data(), buffer_.nbytes());
  } else {
    backend(buffer_.device()).copy_to_host(send_.data(), buffer_.raw_data(), buffer_.nbytes());
  }
  std::memset(send_.data() + buffer_.nbytes(), 0, padded - buffer_.nbytes());  // the last chunk's padding
  check_mpi(MPI_Ialltoall(send_.data(), static_cast<int>(chunk_), type_, received_.data(), static_cast<int>(chunk_), type_,
                          scatter, &request_),
            "the reduce-scatter of a gradient bucket (MPI_Ialltoall)");
}

MpiSum::~MpiSum() {
  if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);  // MPI may still write into the buffers
  pool_.give_back(std::move(send_));
  pool_.give_back(std::move(received_));
  pool_.give_back(std::move(summed_));
}

bool MpiSum::advance(bool block) {
  int done = 1;
  if (block) {
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "a gradient sum (MPI_Wait)");
  } else {
    check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "a gradient sum (MPI_Test)");
  }
  if (!done) return false;
  step_ == 1 ? start_gather() : write_back();
  return true;
}

// Step 1 is done: add the N copies of this rank's chunk in rank order and gather the sums
// (into send_, free now).
void MpiSum::start_gather() {
  type_ == MPI_FLOAT ? add_chunks<float>() : add_chunks<double>();
  check_mpi(MPI_Iallgather(summed_.data(), static_cast<int>(chunk_), type_, send_.data(), static_cast<int>(chunk_), type_,
                           gather_, &request_),
            "the all-gather of a gradient bucket (MPI_Iallgather)");
  step_ = 2;
}

// Step 2 is done: the sums go back into the buffer.
void MpiSum::write_back() {
  if (buffer_.device() == Device::cpu) {
    std::memcpy(buffer_.raw_data(), send_.data(), buffer_.nbytes());
  } else {
    backend(buffer_.device()).copy_from_host(buffer_.raw_data(), send_.data(), buffer_.nbytes());
  }
  buffer_.mark_written();
  step_ = 3;
}

template <typename T>
void MpiSum::add_chunks() {
  const T* from = reinterpret_cast<const T*>(received_.data());  // [ranks, chunk]
  T* sum = reinterpret_cast<T*>(summed_.data());                 // [chunk]
  for (int64_t i = 0; i < chunk_; ++i) sum[i] = from[i];
  for (int r = 1; r < ranks_; ++r) {
    for (int64_t i = 0; i < chunk_; ++i) sum[i] += from[r * chunk_ + i];
  }
}

// The sums in flight, in the order they started. Moving them on keeps that order for the
// all-gathers: a sum whose reduce-scatter is not done holds back every later one.
class SumQueue {
 public:
  void push(MpiSum* sum) { sums_.push_back(sum); }
  void remove(MpiSum* sum) { sums_.erase(std::remove(sums_.begin(), sums_.end(), sum), sums_.end()); }

  // Without blocking: as far as MPI has got.
  void poll() {
    for (MpiSum* sum : sums_) {
      if (sum->step() == 1 && !sum->advance(false)) break;  // later sums may not start their all-gather yet
      if (sum->step() == 2) sum->advance(false);
    }
  }
  // Until `target` is done: every earlier sum first starts its all-gather.
  void wait(MpiSum* target) {
    for (MpiSum* sum : sums_) {
      if (sum->step() == 1) sum->advance(true);
      if (sum == target) break;
    }
    while (target->step() < 3) target->advance(true);
  }

 private:
  std::vector<MpiSum*> sums_;
};

// What start_sum hands out: a sum in the world's queue.
class QueuedSum final : public PendingSum {
 public:
  QueuedSum(SumQueue& queue, std::unique_ptr<MpiSum> sum) : queue_(queue), sum_(std::move(sum)) { queue_.push(sum_.get()); }
  ~QueuedSum() override {
    if (sum_->step() < 3) queue_.wait(sum_.get());  // (only on an error path: finish() waits for every sum)
    queue_.remove(sum_.get());
  }
  bool poll() override {
    queue_.poll();
    return sum_->step() == 3;
  }
  void wait() override { queue_.wait(sum_.get()); }

 private:
  SumQueue& queue_;
  std::unique_ptr<MpiSum> sum_;
};

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;  // only the main thread calls MPI (OpenMP threads never do)
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "starting (MPI_Init_thread)");
      owns_mpi_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors become messages, not crashes
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &scatter_), "MPI_Comm_dup");  // the sums' two steps (MpiSum)
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &gather_), "MPI_Comm_dup");
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    library_ = std::string(version, static_cast<std::size_t>(length));
    library_ = library_.substr(0, library_.find(','));  // "Open MPI v4.1.4"
  }
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&scatter_);
    MPI_Comm_free(&gather_);
    if (owns_mpi_) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return cat("MPI (", library_, "), ", size_, size_ == 1 ? " rank" : " ranks"); }

  std::unique_ptr<PendingSum> start_sum(Tensor buffer) override {
    return std::make_unique<QueuedSum>(queue_, std::make_unique<MpiSum>(scatter_, gather_, size_, std::move(buffer), pool_));
  }

  // Every rank's values gathered, then added in rank order (the same bits everywhere).
  void sum(std::vector<double>& values) override {
    const int n = static_cast<int>(values.size());
    std::vector<double> all(values.size() * static_cast<std::size_t>(size_));
    check_mpi(MPI_Allgather(values.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, MPI_COMM_WORLD), "MPI_Allgather");
    for (int i = 0; i < n; ++i) {
      double s = all[i];
      for (int r = 1; r < size_; ++r) s += all[r * n + i];
      values[i] = s;
    }
  }

  void broadcast(std::string& bytes, int root) override {
    uint64_t length = bytes.size();
    check_mpi(MPI_Bcast(&length, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
    bytes.resize(length);
    check_mpi(MPI_Bcast(bytes.data(), static_cast<int>(length), MPI_CHAR, root, MPI_COMM_WORLD), "MPI_Bcast");
  }

  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  [[noreturn]] void abort_job(int status) override {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);  // MPI_Abort does not return; this keeps the promise if it ever did
  }

 private:
  bool owns_mpi_ = false;
  int rank_ = 0, size_ = 1;
  MPI_Comm scatter_ = MPI_COMM_NULL, gather_ = MPI_COMM_NULL;
  StagingPool pool_;  // before queue_: outlives the sums
  SumQueue queue_;
  std::string library_;
};

}  // namespace

std::unique_ptr<Communicator> mpi_world() { return std::make_unique<MpiWorld>(); }

}  // namespace qkgrad::distributed
