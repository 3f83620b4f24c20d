// qkgrad-bench-matmul: what does qkgrad add on top of the raw GEMM call it makes?
//
// For a few GEMM sizes it times, in the same run and interleaved (A B C A B C ...):
//   blas     the bare float32 GEMM of the provider in use (cpu::sgemm: oneDNN or OpenBLAS,
//            backends/cpu/cpu_gemm_provider.h) into a preallocated C (the reference: the best
//            qkgrad can do)
//   forward  qkgrad matmul(a, b) with no grad (allocates C through the caching allocator)
//   fwd+bwd  matmul with a and b requiring grad, then backward: 3 GEMMs, compared with 3 BLAS calls
// and prints medians and the ratio to BLAS (1.00 = no overhead).
//   qkgrad-bench-matmul [--reps N] [--threads N]
// The command line is cli/'s Args (CLI11, as qkgrad-translate's): a bad or missing value, or an
// unknown option, is refused with a message that names it, and exit status 2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cpu/cpu_gemm_provider.h"
#include "cli/args.h"
#include "core/autograd.h"
#include "core/backend.h"
#include "ops/ops.h"

using namespace qkgrad;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15, threads = 0;  // threads 0: all
  Args args("qkgrad-bench-matmul", "qkgrad's matmul, forward and forward + backward, against the raw BLAS calls.",
            kProgramStyle);
  args.option("reps", "timed repetitions; the median is printed", &reps, 1, 1'000'000);
  args.option("threads", "CPU threads", &threads, 1, 4096)->default_str("all");
  if (const auto status = args.parse_main(argc, argv)) return *status;
  if (threads > 0) set_num_threads(threads);
  std::printf("threads %d, %d repetitions, median ms (GFLOP/s), ratio = qkgrad / blas\n", num_threads(), reps);
  std::printf("%-22s %18s %18s %7s %18s %18s %7s\n", "m x k x n", "blas", "forward", "ratio", "3x blas", "fwd+bwd", "ratio");

  struct Size { int64_t m, k, n; };
  for (const Size s : {Size{256, 256, 256}, Size{512, 512, 512}, Size{1024, 1024, 1024}, Size{1280, 256, 8000}}) {
    Generator gen(1);
    Tensor a = Tensor::randn({s.m, s.k}, gen), b = Tensor::randn({s.k, s.n}, gen);
    Tensor c = Tensor::empty({s.m, s.n});
    Tensor ga = Tensor::randn({s.m, s.k}, gen), gb = Tensor::randn({s.k, s.n}, gen);
    Tensor seed = Tensor::ones({s.m, s.n});
    Tensor pa = a.clone(), pb = b.clone();
    pa.requires_grad_();
    pb.requires_grad_();
    auto blas = [&](const float* x, const float* y, float* z, bool tx, bool ty, int64_t m, int64_t n, int64_t k) {
      cpu::sgemm(tx, ty, m, n, k, 1.0f, x, tx ? m : k, y, ty ? k : n, 0.0f, z, n);
    };
    std::vector<double> t_blas, t_fwd, t_blas3, t_train;
    for (int r = 0; r < reps + 2; ++r) {  // the first 2 rounds warm caches and are dropped
      double t0 = now_ms();
      blas(a.data<float>(), b.data<float>(), c.data<float>(), false, false, s.m, s.n, s.k);
      const double blas_ms = now_ms() - t0;

      t0 = now_ms();
      {
        NoGradGuard no_grad;
        const Tensor out = matmul(a, b);
      }
      const double fwd_ms = now_ms() - t0;

      t0 = now_ms();
      blas(a.data<float>(), b.data<float>(), c.data<float>(), false, false, s.m, s.n, s.k);
      blas(seed.data<float>(), b.data<float>(), ga.data<float>(), false, true, s.m, s.k, s.n);
      blas(a.data<float>(), seed.data<float>(), gb.data<float>(), true, false, s.k, s.n, s.m);
      const double blas3_ms = now_ms() - t0;

      t0 = now_ms();
      pa.clear_grad();
      pb.clear_grad();
      matmul(pa, pb).backward(seed);
      const double train_ms = now_ms() - t0;
      if (r >= 2) {
        t_blas.push_back(blas_ms);
        t_fwd.push_back(fwd_ms);
        t_blas3.push_back(blas3_ms);
        t_train.push_back(train_ms);
      }
    }
    const double flop = 2.0 * static_cast<double>(s.m * s.k * s.n);
    auto cell = [&](double ms, double f) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%8.3f (%6.1f)", ms, f / ms / 1e6);
      return std::string(buf);
    };
    const double mb = median(t_blas), mf = median(t_fwd), m3 = median(t_blas3), mt = median(t_train);
    char label[64];
    std::snprintf(label, sizeof label, "%ld x %ld x %ld", static_cast<long>(s.m), static_cast<long>(s.k), static_cast<long>(s.n));
    std::printf("%-22s %18s %18s %7.2f %18s %18s %7.2f\n", label, cell(mb, flop).c_str(), cell(mf, flop).c_str(),
                mf / mb, cell(m3, 3 * flop).c_str(), cell(mt, 3 * flop).c_str(), mt / m3);
  }
  return 0;
}
