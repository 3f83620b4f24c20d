// The CUDA backend's test suite: every kernel, through the public ops, against the CPU.
//
//   - every gradient-check case (ops/checks) in float64 and float32, value and every gradient
//   - large shapes (rows longer than a block, more elements than one grid) and edge cases
//     (empty tensors, rows of all −∞, NaN)
//   - the fused attention in every configuration, KV-cache decoding, tk > 1024
//   - the random kernels (dropout, word dropout): bit-identical masks
//   - the optimizers and gradient clipping
//   - the Seq2SeqTransformer trained 5 steps on both devices, and decoding step by step; GPU
//     determinism; the caching allocator
//   - errors when an op mixes a CPU and a CUDA tensor
//
// Every case skips (with a warning saying why) without a CUDA build or a GPU. Each comparison
// states its tolerance: the GPU adds in another order than the CPU (a fixed tree instead of a
// loop), and nvcc fuses a·b + c into one FMA, so results agree to rounding, not bit for bit —
// except the random kernels, whose masks come from the same Philox stream.
//
// Testing the tests without a GPU: with QKGRAD_CUDA_TESTS_ON_CPU defined the CPU stands in for
// the GPU (every comparison is then the CPU against itself; the cases that need a real
// CUDA device skip), e.g.
//   meson setup build-dry -Dcpp_args=-DQKGRAD_CUDA_TESTS_ON_CPU && ninja -C build-dry
//   build-dry/tests/qkgrad-tests "[cuda]"
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/tensor.h"
#include "io/checkpoint.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/checks/op_cases.h"
#include "ops/op_table.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "toy_seq2seq.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {

// ---------------------------------------------------------------------------------------------
// The device under test, and skipping
// ---------------------------------------------------------------------------------------------

#ifdef QKGRAD_CUDA_TESTS_ON_CPU
constexpr Device kGpu = Device::cpu;  // a dry run of the suite: the CPU against itself
#else
constexpr Device kGpu = Device::cuda;
#endif

// True (with a warning saying why) when there is no GPU to test; the case then does nothing.
bool skip_without_gpu() {
  if (kGpu == Device::cpu) return false;
  if (cuda_available()) return false;
  WARN("CUDA test skipped: " << cuda_info().summary);
  return true;
}

// For the few cases that need a real CUDA device (device query, mixing devices, kernel design).
bool skip_in_dry_run() {
  if (kGpu == Device::cuda) return false;
  WARN("skipped in the CPU dry run (QKGRAD_CUDA_TESTS_ON_CPU)");
  return true;
}

// ---------------------------------------------------------------------------------------------
// Comparing tensors
// ---------------------------------------------------------------------------------------------

std::string num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// got is close to want when |got − want| <= atol + rtol·|want| for every element.
struct Tolerance {
  double rtol, atol;
};

// float64: each operation rounds at about 1e-16 relative; the GPU differs from the CPU only in
// the order of its additions, FMAs and the last bit of exp/log/tanh, so even with a few
// thousand roundings and some cancellation the results agree far inside 1e-10.
constexpr Tolerance kFloat64{1e-10, 1e-10};
// float32: 6e-8 per rounding; a GPU tree sum of n terms and the CPU's loop differ by a few
// roundings of the partial sums: 1e-4 relative + 1e-5 absolute (for elements near 0 after
// cancellation) leaves a wide margin for sums of a few thousand terms. Longer float32 sums
// (the CPU adds some of them in a plain sequential loop) are also judged against the exact
// result: see check_close.
constexpr Tolerance kFloat32{1e-4, 1e-5};

Tolerance tolerance_for(DType dtype) { return dtype == DType::f64 ? kFloat64 : kFloat32; }

// Checks got (the GPU's) against want (the CPU's) within tol; ±∞ must match exactly and NaN
// must meet NaN. Reports how many elements are off and the worst one.
//
// With `exact` (the float64 CPU result for float32 runs on float32-representable inputs), an
// element also passes when the GPU is at least about as close to the exact result as the
// CPU's own float32 result: |got − exact| <= 2·|want − exact| + atol + rtol·|exact|. A float32
// sum of 10⁵ terms on the CPU may be off by more than kFloat32 by itself; a wrong kernel is
// off by far more than either.
void check_close(const Tensor& got, const Tensor& want, Tolerance tol, const std::string& what,
                 const Tensor& exact = Tensor()) {
  INFO(what);
  REQUIRE(got.defined() == want.defined());
  if (!want.defined()) return;
  INFO("gpu " << describe(got) << ", cpu " << describe(want));
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  std::vector<double> e;
  if (exact.defined()) {
    REQUIRE(exact.shape() == want.shape());
    e = exact.to_vector();
  }
  std::size_t bad = 0, worst = 0;
  double worst_excess = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    bool ok;
    double excess = 0;
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      ok = std::isnan(a[i]) && std::isnan(b[i]);
      excess = INFINITY;
    } else if (std::isinf(a[i]) || std::isinf(b[i])) {
      ok = a[i] == b[i];
      excess = INFINITY;
    } else {
      const double diff = std::fabs(a[i] - b[i]), bound = tol.atol + tol.rtol * std::fabs(b[i]);
      ok = diff <= bound;
      if (!ok && !e.empty() && std::isfinite(e[i])) {
        ok = std::fabs(a[i] - e[i]) <=
             2 * std::fabs(b[i] - e[i]) + tol.atol + tol.rtol * std::fabs(e[i]);
      }
      excess = bound > 0 ? diff / bound : diff * 1e300;  // how far past the bound, to rank
    }
    if (!ok) {
      if (bad == 0 || excess > worst_excess) {
        worst = i;
        worst_excess = excess;
      }
      ++bad;
    }
  }
  INFO(bad << " of " << b.size() << " elements differ by more than " << tol.atol << " + "
            << tol.rtol << "·|cpu|; the worst, flat index " << worst << ": gpu "
            << (bad ? num(a[worst]) : "-") << ", cpu " << (bad ? num(b[worst]) : "-")
            << (bad && !e.empty() ? ", exact " + num(e[worst]) : std::string()));
  CHECK(bad == 0);
}

// Bit-identical (the random kernels; values compared as doubles, ids as integers).
void check_identical(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what << ": gpu " << describe(got) << ", cpu " << describe(want));
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  std::size_t bad = 0, first = 0;
  if (want.dtype() == DType::i64) {
    const std::vector<int64_t> a = got.to_ids(), b = want.to_ids();
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (a[i] != b[i] && bad++ == 0) first = i;
    }
  } else {
    const std::vector<double> a = got.to_vector(), b = want.to_vector();
    for (std::size_t i = 0; i < b.size(); ++i) {
      const bool same = a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]));
      if (!same && bad++ == 0) first = i;
    }
  }
  INFO(bad << " of " << want.numel() << " elements differ; the first at flat index " << first);
  CHECK(bad == 0);
}

// ---------------------------------------------------------------------------------------------
// Running a function on both devices
// ---------------------------------------------------------------------------------------------

// Every comparison starts from float32 numbers (exact in float64 as well): the float32 runs
// then see the same inputs as the float64 runs, and the float64 CPU run is, to about 1e-16,
// the exact result of the float32 runs.
Tensor representable_in_f32(const Tensor& x) {
  return x.detach().to(DType::f32).to(DType::f64);
}
std::vector<Tensor> representable_in_f32(const std::vector<Tensor>& xs) {
  std::vector<Tensor> out;
  for (const Tensor& x : xs) out.push_back(representable_in_f32(x));
  return out;
}

// The fixed upstream gradient of an output: standard normal from its own seed, so that every
// output element has its own random weight in the backward (float64, float32-representable).
Tensor upstream_for(const Shape& shape) {
  Generator gen(4242, 3);
  return Tensor::randn(shape, gen, DType::f32).to(DType::f64);
}

// A function's output and the gradients of its inputs.
struct Run {
  Tensor out;
  std::vector<Tensor> grads;  // undefined where no gradient reached an input
};

// Copies the float64 cpu inputs into dtype on device (leaves that require grad), runs fn and
// backpropagates upstream_for(out): every device sees the same values, converted the same way.
Run run_on(const GradcheckFn& fn, const std::vector<Tensor>& inputs64, DType dtype,
           Device device) {
  std::vector<Tensor> in;
  for (const Tensor& x : inputs64) in.push_back(x.detach().to(dtype).to(device).requires_grad_());
  Run r;
  r.out = fn(in);
  r.out.backward(upstream_for(r.out.shape()).to(r.out.dtype()).to(device));
  for (const Tensor& x : in) r.grads.push_back(x.grad());
  return r;
}

// run_on, returning false (and the error) instead of throwing; the tape is cleared after an
// error, since a forward that threw halfway leaves its first nodes on it.
bool try_run_on(const GradcheckFn& fn, const std::vector<Tensor>& inputs64, DType dtype,
                Device device, Run& run, std::string& error) {
  try {
    run = run_on(fn, inputs64, dtype, device);
    return true;
  } catch (const std::exception& e) {
    tape().clear();
    error = e.what();
    return false;
  }
}

// The GPU's run against the CPU's in dtype; exact is the float64 CPU run (see check_close),
// used for float32.
void compare_runs(const Run& gpu, const Run& cpu, const Run& exact, DType dtype) {
  const Tolerance tol = tolerance_for(dtype);
  const bool f32 = dtype == DType::f32;
  check_close(gpu.out, cpu.out, tol, "output", f32 ? exact.out : Tensor());
  REQUIRE(gpu.grads.size() == cpu.grads.size());
  for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
    check_close(gpu.grads[i], cpu.grads[i], tol, "gradient of input " + std::to_string(i),
                f32 ? exact.grads[i] : Tensor());
  }
}

// fn on the CPU and on the GPU, in float64 and float32 (inputs rounded to float32 first). An
// error on the GPU is reported as a failure, and the next comparison still runs.
void compare_on_gpu(const std::string& what, const GradcheckFn& fn,
                    const std::vector<Tensor>& inputs64) {
  const std::vector<Tensor> inputs = representable_in_f32(inputs64);
  const Run exact = run_on(fn, inputs, DType::f64, Device::cpu);
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(what << " in " << dtype_name(dtype));
    const Run cpu = dtype == DType::f64 ? exact : run_on(fn, inputs, dtype, Device::cpu);
    Run gpu;
    std::string error;
    if (!try_run_on(fn, inputs, dtype, kGpu, gpu, error)) {
      FAIL_CHECK("the GPU run threw: " << error);
      continue;
    }
    compare_runs(gpu, cpu, exact, dtype);
  }
}

// ---------------------------------------------------------------------------------------------
// 1. The gradient-check cases
// ---------------------------------------------------------------------------------------------

using In = std::vector<Tensor>;

// Index or target ids on the device of `like`.
Tensor ids_on(const std::vector<int64_t>& ids, const Shape& s, const Tensor& like) {
  return Tensor::from_ids(ids, s, like.device());
}

}  // namespace

TEST_CASE("cuda: device query reports the GPU and a kernel runs", "[cuda]") {
  if (skip_without_gpu()) return;
  if (skip_in_dry_run()) return;
  const CudaInfo info = cuda_info();
  CHECK(info.device_count >= 1);
  CHECK(info.summary.find("kernel ran") != std::string::npos);
}

TEST_CASE("cuda: host <-> device round trip, fill and dtype conversion", "[cuda]") {
  if (skip_without_gpu()) return;
  const Tensor host = Tensor::arange(1000, DType::f64);
  const Tensor dev = host.to(kGpu);
  CHECK(dev.device() == kGpu);
  CHECK(dev.to(Device::cpu).to_vector() == host.to_vector());
  CHECK(dev.to(DType::f32).to(Device::cpu).to_vector() == host.to_vector());
  CHECK(dev.to(DType::bf16).to(Device::cpu).to_vector() == host.to(DType::bf16).to_vector());  // same rounding
  CHECK(Tensor::full({3}, 2.5, DType::f32, kGpu).to_vector() == std::vector<double>{2.5, 2.5, 2.5});
}

TEST_CASE("cuda: mixed precision (bf16 products on cuBLAS) equals the CPU's: linear with a bias and matmul_bf16, "
          "forward and backward", "[cuda][bf16]") {
  if (skip_without_gpu()) return;
  Generator gen(21);
  // Shapes with a batch, a transposed operand and a k past cuBLAS's tile sizes.
  const Tensor x0 = Tensor::randn({3, 37, 70}, gen), w0 = Tensor::randn({45, 70}, gen), b0 = Tensor::randn({45}, gen);
  const Tensor up = Tensor::randn({3, 37, 45}, gen);
  auto run = [&](Device device) {
    Tensor x = x0.to(device).requires_grad_(), w = w0.to(device).requires_grad_(), b = b0.to(device).requires_grad_();
    Tensor y, z;
    {
      const MixedPrecision guard(Precision::bf16);
      y = linear(x, w, b);                    // [3, 37, 45]
      z = matmul_bf16(x, w, false, true);     // [3, 37, 45], the explicit form
    }
    sum(y * up.to(device) + z * up.to(device)).backward();
    return std::vector<Tensor>{y.detach().to(Device::cpu), z.detach().to(Device::cpu), x.grad().to(Device::cpu),
                               w.grad().to(Device::cpu), b.grad().to(Device::cpu)};
  };
  auto max_abs_diff = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> u = a.to_vector(), v = b.to_vector();
    REQUIRE(u.size() == v.size());
    double worst = 0;
    for (std::size_t i = 0; i < u.size(); ++i) worst = std::max(worst, std::fabs(u[i] - v[i]));
    return worst;
  };
  auto max_abs = [&](const Tensor& a) { return max_abs_diff(a, Tensor::zeros(a.shape(), a.dtype())); };
  const auto gpu = run(kGpu), cpu = run(Device::cpu);
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    INFO("output " << i);
    CHECK(gpu[i].dtype() == DType::f32);
    // The same rounded operands and f32 accumulation: only the summation order differs.
    CHECK(max_abs_diff(gpu[i], cpu[i]) <= 1e-3 * (1 + max_abs(cpu[i])));
  }
  // Rounding shows: not the f32 product.
  CHECK(max_abs_diff(gpu[1], matmul(x0, w0, false, true)) > 1e-4);
  // Native bf16 from Ampere on; an older GPU is named with its compute capability (train refuses it).
  if constexpr (kGpu == Device::cuda) {
    const std::string missing = backend(kGpu).bf16_products_missing();
    INFO(cuda_info().summary);
    if (!missing.empty()) CHECK_THAT(missing, Contains("compute capability") && Contains("no bf16 tensor cores"));
  }
}

TEST_CASE("cuda: random tensors equal the CPU's for the same seed", "[cuda]") {
  if (skip_without_gpu()) return;
  for (DType dtype : {DType::f32, DType::f64}) {
    Generator g_cpu(9), g_gpu(9);
    CHECK(Tensor::uniform({1001}, -1, 1, g_cpu, dtype).to_vector() ==
          Tensor::uniform({1001}, -1, 1, g_gpu, dtype, kGpu).to_vector());
    const auto a = Tensor::randn({1001}, g_cpu, dtype).to_vector();
    const auto b = Tensor::randn({1001}, g_gpu, dtype, kGpu).to_vector();
    // Box-Muller runs in double on both sides; libm and CUDA's log/sin/cos may differ in
    // the last bit of a double, which almost never survives rounding.
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-12));
  }
}

TEST_CASE("cuda: every op case of ops/checks equals the CPU, value and every gradient, f64 and f32",
          "[cuda]") {
  if (skip_without_gpu()) return;
  std::map<std::string, int> checked_per_op;  // comparisons made on the GPU, per op
  for (const OpCase& c : op_cases()) {
    INFO("op case \"" << c.op << ": " << c.name << "\"");
    const std::vector<Tensor> inputs = representable_in_f32(make_case_inputs(c, 0));
    const Run exact = run_on(c.fn, inputs, DType::f64, Device::cpu);
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO("in " << dtype_name(dtype));
      const Run cpu = dtype == DType::f64 ? exact : run_on(c.fn, inputs, dtype, Device::cpu);
      Run gpu;
      std::string error;
      // A case's constants (masks, ids, weights) are made on its inputs' device (ops/checks/),
      // so every case runs on the GPU as written.
      if (!try_run_on(c.fn, inputs, dtype, kGpu, gpu, error)) {
        FAIL_CHECK("the GPU run threw: " << error);
        continue;
      }
      compare_runs(gpu, cpu, exact, dtype);
      ++checked_per_op[c.op];
    }
  }
  // Every differentiable op was compared on the GPU at least once (in both dtypes).
  for (const OpInfo& op : op_table()) {
    INFO("op " << op.name);
    CHECK(checked_per_op[op.name] >= 2);
  }
}

// The float64 finite-difference check itself (core/gradcheck.cpp) runs only on the cpu (it
// perturbs the inputs in place through data<double>()), so it is not repeated on the GPU: the
// GPU's gradients are checked against the CPU's, which gradcheck verifies.

// ---------------------------------------------------------------------------------------------
// Large shapes and edge cases
// ---------------------------------------------------------------------------------------------

namespace {

// Ids 0..limit-1 in a fixed scrambled order, with many repeats.
std::vector<int64_t> scrambled_ids(int64_t count, int64_t limit, int64_t mult = 37) {
  std::vector<int64_t> ids(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) ids[static_cast<std::size_t>(i)] = (i * mult + 11) % limit;
  return ids;
}

// Shapes past one warp, one block (1024 threads) and one grid-stride pass, so that block
// reductions, multi-block reductions and grid-stride loops all run. The constants are made on
// the inputs' device.
std::vector<OpCase> large_cases() {
  const InputDomain any = InputDomain::normal, pos = InputDomain::positive;
  std::vector<OpCase> c;
  c.push_back({"add", "[300, 1, 70] + [50, 70] (both broadcast, 1.05M elements)",
               {{{300, 1, 70}, any}, {{50, 70}, any}}, [](const In& x) { return x[0] + x[1]; }});
  c.push_back({"mul", "[1000, 1001] * [1001]", {{{1000, 1001}, any}, {{1001}, any}},
               [](const In& x) { return x[0] * x[1]; }});
  c.push_back({"div", "[257, 1031] / [257, 1]", {{{257, 1031}, any}, {{257, 1}, pos}},
               [](const In& x) { return x[0] / x[1]; }});
  c.push_back({"sub", "[3] - [1200, 700, 3] (a first)", {{{3}, any}, {{1200, 700, 3}, any}},
               [](const In& x) { return x[0] - x[1]; }});
  c.push_back({"unary", "gelu, silu, tanh, sigmoid, exp, neg, relu, clamp of [1000, 1001]",
               {{{1000, 1001}, any}}, [](const In& x) {
                 return gelu(x[0]) + silu(x[0]) + tanh(x[0]) * sigmoid(x[0]) + exp(x[0] * 0.5) - relu(x[0]) +
                        clamp(x[0], -0.5, 0.7) * (-x[0]);
               }});
  c.push_back({"unary", "log, sqrt, rsqrt, pow, square of [1000, 1001], x > 0",
               {{{1000, 1001}, pos}}, [](const In& x) {
                 return log(x[0]) + sqrt(x[0]) + rsqrt(x[0]) + pow(x[0], 1.5) + square(x[0]) +
                        add_scalar(mul_scalar(x[0], 0.3), 2.0);
               }});
  c.push_back({"sum", "all of [1000, 1001], x > 0", {{{1000, 1001}, pos}},
               [](const In& x) { return sum(x[0]); }});
  c.push_back({"sum", "axis 0 of [3000, 7]", {{{3000, 7}, any}},
               [](const In& x) { return sum(x[0], 0); }});
  c.push_back({"sum", "axis 1 of [5, 3000, 3]", {{{5, 3000, 3}, any}},
               [](const In& x) { return sum(x[0], 1); }});
  c.push_back({"mean", "axis -1 of [7, 5000], keepdim", {{{7, 5000}, any}},
               [](const In& x) { return mean(x[0], -1, true); }});
  c.push_back({"mean", "all of [3001, 333]", {{{3001, 333}, pos}},
               [](const In& x) { return mean(x[0]); }});
  c.push_back({"max", "axis -1 of [6, 5000]", {{{6, 5000}, any}},
               [](const In& x) { return max(x[0], -1); }});
  c.push_back({"max", "axis 0 of [4000, 3]", {{{4000, 3}, any}},
               [](const In& x) { return max(x[0], 0); }});
  c.push_back({"max", "all of [1000, 1001]", {{{1000, 1001}, any}},
               [](const In& x) { return max(x[0]); }});
  c.push_back({"logsumexp", "axis -1 of [5, 4000] of 3x", {{{5, 4000}, any}},
               [](const In& x) { return logsumexp(x[0] * 3.0, -1); }});
  c.push_back({"logsumexp", "all of [700, 1500]", {{{700, 1500}, any}},
               [](const In& x) { return logsumexp(x[0]); }});
  c.push_back({"norm", "axis 1 of [3, 3000, 2]", {{{3, 3000, 2}, any}},
               [](const In& x) { return norm(x[0], 1); }});
  c.push_back({"norm", "all of [1000, 1001]", {{{1000, 1001}, any}},
               [](const In& x) { return norm(x[0]); }});
  c.push_back({"softmax", "rows of 5000: [4, 5000] of 4x", {{{4, 5000}, any}},
               [](const In& x) { return softmax(x[0] * 4.0); }});
  c.push_back({"softmax", "rows of 1025 (just past a block): [3, 1025]", {{{3, 1025}, any}},
               [](const In& x) { return softmax(x[0]); }});
  c.push_back({"log_softmax", "many short rows: [3000, 7]", {{{3000, 7}, any}},
               [](const In& x) { return log_softmax(x[0]); }});
  c.push_back({"log_softmax", "[2, 8000] of 5x", {{{2, 8000}, any}},
               [](const In& x) { return log_softmax(x[0] * 5.0); }});
  c.push_back({"layer_norm", "[6, 3000] with gamma and beta",
               {{{6, 3000}, any}, {{3000}, any}, {{3000}, any}},
               [](const In& x) { return layer_norm(x[0], x[1], x[2], 1e-5); }});
  c.push_back({"layer_norm", "[2000, 64] (dgamma sums 2000 rows)",
               {{{2000, 64}, any}, {{64}, any}, {{64}, any}},
               [](const In& x) { return layer_norm(x[0] * 2.0 + 1.0, x[1], x[2], 1e-5); }});
  c.push_back({"rms_norm", "[6, 3000] with gamma", {{{6, 3000}, any}, {{3000}, any}},
               [](const In& x) { return rms_norm(x[0], x[1], 1e-6); }});
  c.push_back({"rms_norm", "[2000, 64] (dgamma sums 2000 rows)", {{{2000, 64}, any}, {{64}, any}},
               [](const In& x) { return rms_norm(x[0] * 2.0 + 1.0, x[1], 1e-6); }});
  c.push_back({"rope", "[3, 300, 6 heads of 64] from position 40", {{{3, 300, 384}, any}},
               [](const In& x) { return rope(x[0], 6, 40); }});
  c.push_back({"l2_normalize", "[5, 4000]", {{{5, 4000}, any}},
               [](const In& x) { return l2_normalize(x[0]); }});
  c.push_back({"scale_norm", "[3, 4000] with g []", {{{3, 4000}, any}, {{}, pos}},
               [](const In& x) { return scale_norm(x[0], x[1]); }});
  c.push_back({"cross_entropy", "[64, 8000], smoothing 0.1, every fifth row ignored",
               {{{64, 8000}, any}}, [](const In& x) {
                 std::vector<int64_t> t = scrambled_ids(64, 8000, 911);
                 for (std::size_t i = 0; i < t.size(); i += 5) t[i] = 0;
                 return cross_entropy(x[0] * 2.0, ids_on(t, {64}, x[0]), 0.1, 0).sum;
               }});
  c.push_back({"matmul", "[3, 65, 129] x [129, 67]", {{{3, 65, 129}, any}, {{129, 67}, any}},
               [](const In& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul", "[2, 130, 33]ᵀ x [2, 70, 130]ᵀ",
               {{{2, 130, 33}, any}, {{2, 70, 130}, any}},
               [](const In& x) { return matmul(x[0], x[1], true, true); }});
  c.push_back({"linear", "[2, 33, 300] x W[257, 300]ᵀ + b",
               {{{2, 33, 300}, any}, {{257, 300}, any}, {{257}, any}},
               [](const In& x) { return linear(x[0], x[1], x[2]); }});
  c.push_back({"embedding", "V 8000, D 64, ids [16, 64] from 50 rows (many repeats)",
               {{{8000, 64}, any}}, [](const In& x) {
                 return embedding(x[0], ids_on(scrambled_ids(16 * 64, 50), {16, 64}, x[0]));
               }});
  c.push_back({"index_select", "2000 rows of [3000, 16] (repeats)", {{{3000, 16}, any}},
               [](const In& x) {
                 const Tensor ids = ids_on(scrambled_ids(2000, 3000, 7), {2000}, x[0]);
                 return index_select(x[0], 0, ids);
               }});
  c.push_back({"gather", "axis 1 of [64, 3000], index [64, 500] (repeats)", {{{64, 3000}, any}},
               [](const In& x) {
                 return gather(x[0], 1, ids_on(scrambled_ids(64 * 500, 97, 13), {64, 500}, x[0]));
               }});
  c.push_back({"permute", "[17, 33, 65] -> (2, 0, 1)", {{{17, 33, 65}, any}},
               [](const In& x) { return permute(x[0], {2, 0, 1}); }});
  c.push_back({"transpose", "(0, 1) of [300, 301]", {{{300, 301}, any}},
               [](const In& x) { return transpose(x[0], 0, 1); }});
  c.push_back({"concat", "[64, 700] and [64, 300] along 1", {{{64, 700}, any}, {{64, 300}, any}},
               [](const In& x) { return concat({x[0], x[1]}, 1); }});
  c.push_back({"slice", "[100:900) of axis 1 of [64, 1000]", {{{64, 1000}, any}},
               [](const In& x) { return slice(x[0], 1, 100, 900); }});
  c.push_back({"split", "[1000, 20] into 300 + 700 rows, recombined", {{{1000, 20}, any}},
               [](const In& x) {
                 const auto parts = split(x[0], {300, 700}, 0);
                 return concat({parts[1] * 3.0, parts[0]}, 0);
               }});
  c.push_back({"pad", "3 before, 7 after on axis 0 of [500, 33]", {{{500, 33}, any}},
               [](const In& x) { return pad(x[0], 0, 3, 7, -1.5); }});
  c.push_back({"dropout", "p 0.1 on [1000, 1001]", {{{1000, 1001}, any}}, [](const In& x) {
                 Generator gen(5, 6);
                 return dropout(x[0], 0.1, gen);
               }});
  return c;
}

}  // namespace

TEST_CASE("cuda: large shapes (past a warp, a block and a grid pass) equal the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  for (const OpCase& c : large_cases()) {
    compare_on_gpu(c.op + ": " + c.name, c.fn, make_case_inputs(c, 1));
  }
}

TEST_CASE("cuda: empty tensors and rows of all -inf behave as on the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  Generator gen(31);
  auto randn = [&](const Shape& s) { return Tensor::randn(s, gen, DType::f64); };
  SECTION("empty tensors (no kernel may launch a grid of 0 blocks)") {
    const Tensor e = randn({0, 5}), row = randn({5}), w = randn({5, 3}), full = randn({2, 5});
    compare_on_gpu("add, exp, tanh of [0, 5]",
                   [](const In& x) { return exp(x[0] + x[1]) * tanh(x[0]); }, {e, row});
    compare_on_gpu("sum of [0, 5] (= 0)", [](const In& x) { return sum(x[0]); }, {e});
    compare_on_gpu("sum over the empty axis 0 (= zeros [5])",
                   [](const In& x) { return sum(x[0], 0); }, {e});
    compare_on_gpu("mean over axis 1 of [0, 5] (-> [0])",
                   [](const In& x) { return mean(x[0], 1); }, {e});
    compare_on_gpu("softmax, log_softmax of [0, 5]",
                   [](const In& x) { return softmax(x[0]) + log_softmax(x[0]); }, {e});
    compare_on_gpu("layer_norm of [0, 5]",
                   [](const In& x) { return layer_norm(x[0], x[1], x[1]); }, {e, row});
    compare_on_gpu("matmul [0, 5] x [5, 3]",
                   [](const In& x) { return matmul(x[0], x[1]); }, {e, w});
    compare_on_gpu("matmul [2, 0] x [0, 3] (k = 0: zeros)",
                   [](const In& x) { return matmul(x[0], x[1]); }, {randn({2, 0}), randn({0, 3})});
    compare_on_gpu("concat of [0, 5] and [2, 5]",
                   [](const In& x) { return concat({x[0], x[1]}, 0); }, {e, full});
    compare_on_gpu("permute of [0, 5]", [](const In& x) { return permute(x[0], {1, 0}); }, {e});
    compare_on_gpu("embedding of no ids", [](const In& x) {
      return embedding(x[0], ids_on({}, {0}, x[0]));
    }, {w});
    compare_on_gpu("dropout of [0, 5]", [](const In& x) {
      Generator g(2);
      return dropout(x[0], 0.5, g);
    }, {e});
  }
  SECTION("rows of all -inf (fully masked logits)") {
    const Tensor x = Tensor::from_vector({-INFINITY, -INFINITY, -INFINITY, -INFINITY, 0.5, -1.0,
                                          2.0, -INFINITY},
                                         {2, 4}, DType::f64);
    // softmax gives a zero row, log_softmax a row of −∞; their backward is finite.
    compare_on_gpu("softmax with a row of all -inf",
                   [](const In& x) { return softmax(x[0]); }, {x});
    compare_on_gpu("log_softmax with a row of all -inf",
                   [](const In& x) { return log_softmax(x[0]); }, {x});
    compare_on_gpu("max over rows with -inf", [](const In& x) { return max(x[0], -1); }, {x});
    {
      // logsumexp of an all −∞ row is −∞ (forward only: its gradient e^(x − y) is NaN there).
      NoGradGuard no_grad;
      for (DType dtype : {DType::f64, DType::f32}) {
        INFO("logsumexp with a row of all -inf in " << dtype_name(dtype));
        check_close(logsumexp(x.to(dtype).to(kGpu), -1), logsumexp(x.to(dtype), -1),
                    tolerance_for(dtype), "logsumexp");
      }
    }
  }
}

TEST_CASE("cuda: NaN and infinity propagate as on the CPU (forward)", "[cuda]") {
  if (skip_without_gpu()) return;
  // One NaN and one +∞ in a row each; the other rows are ordinary. The CPU's result is the
  // contract (core/backend.h), whatever it does with them.
  const Tensor x = Tensor::from_vector({0.5, NAN, -1.0, 2.0,      //
                                        1.0, 3.0, INFINITY, -2.0,  //
                                        0.25, -0.75, 1.5, 0.0},
                                       {3, 4}, DType::f64);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> fns = {
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"add a row", [](const Tensor& t) { return t + slice(t, 0, 2, 3); }},
      {"sum", [](const Tensor& t) { return sum(t); }},
      {"sum axis -1", [](const Tensor& t) { return sum(t, -1); }},
      {"sum axis 0", [](const Tensor& t) { return sum(t, 0); }},
      {"max axis -1", [](const Tensor& t) { return max(t, -1); }},
      {"max axis 0", [](const Tensor& t) { return max(t, 0); }},
      {"logsumexp axis -1", [](const Tensor& t) { return logsumexp(t, -1); }},
      {"norm axis -1", [](const Tensor& t) { return norm(t, -1); }},
      {"softmax", [](const Tensor& t) { return softmax(t); }},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t); }},
      {"l2_normalize", [](const Tensor& t) { return l2_normalize(t); }},
      {"matmul with its transpose", [](const Tensor& t) { return matmul(t, t, false, true); }},
  };
  NoGradGuard no_grad;
  for (DType dtype : {DType::f64, DType::f32}) {
    for (const auto& [name, fn] : fns) {
      INFO(name << " in " << dtype_name(dtype));
      const Tensor cpu = fn(x.to(dtype));
      Tensor gpu;
      try {
        gpu = fn(x.to(dtype).to(kGpu));
      } catch (const std::exception& e) {
        FAIL_CHECK("the GPU run threw: " << e.what());
        continue;
      }
      check_close(gpu, cpu, tolerance_for(dtype), name);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 2. The fused attention
// ---------------------------------------------------------------------------------------------

namespace {

const char* mode_name(AttentionMode mode) { return attention_mode_name(mode); }

struct AttentionCase {
  std::string name;
  int64_t batch = 1, tq = 1, kv_time = 1, heads = 1, head_dim = 1;
  bool per_head_g = false;   // qknorm: g [H] instead of []
  AttentionOptions options;  // mode, masks, query_offset, kv_length, dropout
};

struct AttentionRun {
  Tensor out, probs;
  std::vector<Tensor> grads;  // dq, dk, dv, dg (dg undefined for scaled_dot)
};

// The case's inputs, made in float32 on the cpu from a fixed seed (so that the float64 run is
// the exact answer for the float32 one), converted to dtype and moved to device; then the
// forward (with the probabilities if with_probs) and a backward from a fixed random upstream
// gradient. Dropout draws from a fresh Generator(77): the same mask on each device and in each
// dtype. On the GPU, with_probs = false is the training path (P is never made: the backward
// recomputes it from the saved row statistics); with_probs = true adds the kernel that writes P.
AttentionRun run_attention(const AttentionCase& ac, DType dtype, Device device, bool with_probs) {
  Generator gen(1234);
  const int64_t width = ac.heads * ac.head_dim;
  const bool qk = ac.options.mode == AttentionMode::qknorm;
  auto leaf = [&](const Tensor& t) { return t.to(dtype).to(device).requires_grad_(); };
  const Tensor q = leaf(Tensor::randn({ac.batch, ac.tq, width}, gen, DType::f32));
  const Tensor k = leaf(Tensor::randn({ac.batch, ac.kv_time, width}, gen, DType::f32));
  const Tensor v = leaf(Tensor::randn({ac.batch, ac.kv_time, width}, gen, DType::f32));
  // g in [1.5, 6]: a softmax far from uniform, as in training (g₀ ≈ 12 for L = 72).
  const Shape g_shape = ac.per_head_g ? Shape{ac.heads} : Shape{};
  const Tensor g = leaf(Tensor::uniform(g_shape, 1.5, 6.0, gen, DType::f32));
  AttentionOptions o = ac.options;
  o.heads = ac.heads;
  o.return_probs = with_probs;
  Generator dropout_gen(77);
  o.generator = &dropout_gen;
  const AttentionOutput a = attention(q, k, v, qk ? g : Tensor(), o);
  a.out.backward(upstream_for(a.out.shape()).to(dtype).to(device));
  return {a.out, a.probs, {q.grad(), k.grad(), v.grad(), qk ? g.grad() : Tensor()}};
}

void compare_attention(const AttentionCase& ac) {
  static const char* const grad_names[] = {"dq", "dk", "dv", "dg"};
  const AttentionRun exact = run_attention(ac, DType::f64, Device::cpu, true);
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO("attention " << mode_name(ac.options.mode) << ", " << ac.name << ", in "
                      << dtype_name(dtype));
    const AttentionRun cpu =
        dtype == DType::f64 ? exact : run_attention(ac, dtype, Device::cpu, true);
    const AttentionRun gpu = run_attention(ac, dtype, kGpu, false);
    const AttentionRun gpu_with_probs = run_attention(ac, dtype, kGpu, true);
    // Asking for P adds a kernel; the forward and backward are the same ones, bit for bit.
    CHECK(gpu_with_probs.out.to_vector() == gpu.out.to_vector());
    for (int i = 0; i < 3; ++i) CHECK(gpu_with_probs.grads[i].to_vector() == gpu.grads[i].to_vector());
    // Softmax rows, dot products of head_dim terms and sums over tk keys: tolerance_for(dtype),
    // in float32 with the exact (float64) result as a second judge (see check_close): dg sums
    // B·H·tq·tk terms.
    const Tolerance tol = tolerance_for(dtype);
    const bool f32 = dtype == DType::f32;
    check_close(gpu.out, cpu.out, tol, "out", f32 ? exact.out : Tensor());
    check_close(gpu_with_probs.probs, cpu.probs, tol, "probs (before dropout; masked entries are 0)",
                f32 ? exact.probs : Tensor());
    for (int i = 0; i < 4; ++i) {
      check_close(gpu.grads[i], cpu.grads[i], tol, grad_names[i], f32 ? exact.grads[i] : Tensor());
    }
  }
}

AttentionOptions mode_options(AttentionMode mode) {
  AttentionOptions o;
  o.mode = mode;
  return o;
}

}  // namespace

TEST_CASE("cuda: fused attention equals the CPU in every configuration, forward and backward",
          "[cuda]") {
  if (skip_without_gpu()) return;
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    const AttentionOptions base = mode_options(mode);
    {
      AttentionCase c{"cross-attention B2 tq3 tk5 H2 d4", 2, 3, 5, 2, 4, false, base};
      compare_attention(c);
    }
    {
      AttentionCase c{"key padding (lengths 5, 2, 1), H2 d3", 3, 4, 5, 2, 3, false, base};
      c.options.key_lengths = {5, 2, 1};
      compare_attention(c);
    }
    {
      AttentionCase c{"causal self-attention with padding, T6 H2 d5", 2, 6, 6, 2, 5, false, base};
      c.options.causal = true;
      c.options.key_lengths = {6, 4};
      compare_attention(c);
    }
    {
      // KV-cache decoding: 2 new queries at positions 4 and 5 over the first 6 of 9 cached
      // steps; dk and dv of the unused cache rows 6..8 must be 0.
      AttentionCase c{"causal, query_offset 4, kv_length 6 of 9 cached steps (decoding)",
                      2, 2, 9, 2, 4, false, base};
      c.options.causal = true;
      c.options.query_offset = 4;
      c.options.kv_length = 6;
      compare_attention(c);
      c.name = "as above with key lengths 6, 3";
      c.options.key_lengths = {6, 3};
      compare_attention(c);
    }
    {
      AttentionCase c{"one query step per row (tq 1) over 7 keys", 3, 1, 7, 2, 4, false, base};
      c.options.key_lengths = {7, 1, 4};
      compare_attention(c);
    }
    {
      // Every key of batch entry 0 is padding: all its query rows see nothing (output 0, P 0).
      AttentionCase c{"a batch entry with every key masked (length 0)", 2, 3, 4, 2, 3, false, base};
      c.options.key_lengths = {0, 3};
      compare_attention(c);
      c.name = "every key masked, causal";
      c.options.causal = true;
      compare_attention(c);
    }
    {
      AttentionCase c{"attention dropout 0.1, causal, padding", 2, 5, 5, 2, 4, false, base};
      c.options.dropout = 0.1;
      c.options.causal = true;
      c.options.key_lengths = {5, 3};
      compare_attention(c);
      c.name = "attention dropout 0.5, cross-attention";
      c.options.dropout = 0.5;
      c.options.causal = false;
      c.tq = 3;
      compare_attention(c);
    }
    {
      AttentionCase c{"H1, d 17 (not a multiple of 4 or of a warp)", 2, 3, 6, 1, 17, false, base};
      compare_attention(c);
      c.name = "H3, d 33";
      c.heads = 3;
      c.head_dim = 33;
      compare_attention(c);
    }
    if (mode == AttentionMode::qknorm) {
      AttentionCase c{"one gain per head g [3], causal", 2, 4, 4, 3, 4, true, base};
      c.options.causal = true;
      compare_attention(c);
      c.name = "g [3] with dropout 0.1 and padding";
      c.options.dropout = 0.1;
      c.options.key_lengths = {4, 2};
      compare_attention(c);
    }
  }
}

TEST_CASE("cuda: fused attention at the demo's sizes (B 16, T 64, d 64, H 4 and 8) equals the CPU",
          "[cuda]") {
  if (skip_without_gpu()) return;
  std::vector<int64_t> lengths;  // 64, 61, 58, ... down to 19: padding as in a sorted batch
  for (int64_t b = 0; b < 16; ++b) lengths.push_back(64 - 3 * b);
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    for (int64_t heads : {4, 8}) {
      // The decoder's self-attention in training: causal, padded, dropout 0.1.
      const std::string h = "H" + std::to_string(heads);
      AttentionCase self{"decoder self-attention, causal, padding, dropout 0.1, " + h,
                         16, 64, 64, heads, 64, false, mode_options(mode)};
      self.options.causal = true;
      self.options.key_lengths = lengths;
      self.options.dropout = 0.1;
      compare_attention(self);
      // Cross-attention over a padded source of another length.
      AttentionCase cross{"cross-attention over 57 source steps, padding, " + h,
                          16, 64, 57, heads, 64, false, mode_options(mode)};
      std::vector<int64_t> src_lengths;
      for (int64_t b = 0; b < 16; ++b) src_lengths.push_back(57 - 2 * b);
      cross.options.key_lengths = src_lengths;
      compare_attention(cross);
    }
  }
}

TEST_CASE("cuda: attention rows longer than 1024 keys (tk 1500) work, or fail with a clear error",
          "[cuda]") {
  if (skip_without_gpu()) return;
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    AttentionCase cross{"tq 4 over tk 1500 (lengths 1500, 1111), H2 d16", 2, 4, 1500, 2, 16, false,
                        mode_options(mode)};
    cross.options.key_lengths = {1500, 1111};
    AttentionCase self{"causal self-attention T 1500 with dropout 0.1, H2 d16",
                       1, 1500, 1500, 2, 16, false, mode_options(mode)};
    self.options.causal = true;
    self.options.dropout = 0.1;
    for (const AttentionCase& c : {cross, self}) {
      try {
        compare_attention(c);
      } catch (const Error& e) {
        // Refusing long rows is allowed, but with a message that says so, not a CUDA error.
        const std::string message = e.what();
        INFO(c.name << ": " << message);
        CHECK(message.find("attention") != std::string::npos);
        CHECK(message.find("CUDA error") == std::string::npos);
        CHECK(message.find("cuBLAS error") == std::string::npos);
        WARN("the GPU refuses attention rows of 1500 keys: " << message);
      }
    }
  }
}

TEST_CASE("cuda: the attention keeps no [tq, tk] matrix: memory grows with T, not T² (flash-style)",
          "[cuda]") {
  if (skip_without_gpu()) return;
  if (skip_in_dry_run()) return;  // about the CUDA kernels (the CPU keeps P)
  // B 1, T 1024, H 8, d 64 in float32: P would be 8·1024·1024·4 bytes = 32 MiB; q, k, v, out and
  // each gradient are 2 MiB. Neither the forward nor the backward may hold anything P-sized.
  const int64_t T = 1024, heads = 8, width = heads * 64;
  const std::size_t p_bytes = std::size_t{heads * T * T} * sizeof(float);
  Generator gen(5);
  const Tensor q = Tensor::randn({1, T, width}, gen, DType::f32).to(kGpu).requires_grad_();
  const Tensor k = Tensor::randn({1, T, width}, gen, DType::f32).to(kGpu).requires_grad_();
  const Tensor v = Tensor::randn({1, T, width}, gen, DType::f32).to(kGpu).requires_grad_();
  const Tensor g = Tensor::full({}, 10.0, DType::f32, kGpu).requires_grad_();
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    INFO(mode_name(mode));
    AttentionOptions o = mode_options(mode);
    o.heads = heads;
    o.causal = true;
    Backend& gpu = backend(kGpu);
    // Cached blocks are handed out for requests down to half their size and counted whole:
    // start from an empty cache so that every block counted is the size asked for.
    gpu.release_cached_memory();
    const std::size_t start = gpu.allocator_stats().bytes_in_use;
    gpu.reset_peak_memory();
    const Tensor out = attention(q, k, v, mode == AttentionMode::qknorm ? g : Tensor(), o).out;
    const std::size_t forward_peak = gpu.allocator_stats().peak_bytes_in_use - start;
    sum(out).backward();
    const std::size_t backward_peak = gpu.allocator_stats().peak_bytes_in_use - start;
    INFO("forward peak " << forward_peak << " bytes, backward peak " << backward_peak
                         << " bytes, P would be " << p_bytes);
    CHECK(forward_peak < p_bytes / 8);   // out (2 MiB) and row statistics
    CHECK(backward_peak < p_bytes / 2);  // plus dq, dk, dv (6 MiB) and the upstream gradient
    for (Tensor t : {q, k, v, g}) t.zero_grad();
  }
}

TEST_CASE("cuda: a head too large for the attention kernel's shared memory fails with a clear error",
          "[cuda]") {
  if (skip_without_gpu()) return;
  if (skip_in_dry_run()) return;  // a limit of the CUDA kernels only
  // One head of 4096 float64 values: even a single row of each tile exceeds 48 KiB.
  Generator gen(6);
  const Tensor x = Tensor::randn({1, 3, 4096}, gen, DType::f64).to(kGpu);
  AttentionOptions o = mode_options(AttentionMode::scaled_dot);
  o.heads = 1;
  CHECK_THROWS_WITH(attention(x, x, x, Tensor(), o), Contains("head size 4096") && Contains("--device cpu"));
}

TEST_CASE("cuda: incremental decoding through a KV cache equals the CPU (append, select_rows)",
          "[cuda]") {
  if (skip_without_gpu()) return;
  const int64_t batch = 3, heads = 2, d = 8, width = heads * d, steps = 5;
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO(mode_name(mode) << " in " << dtype_name(dtype));
      NoGradGuard no_grad;
      Generator gen(8);
      KVCache cpu_cache(batch, steps + 1, width, dtype, Device::cpu);
      KVCache gpu_cache(batch, steps + 1, width, dtype, kGpu);
      const Tensor g = Tensor::full({}, 4.0, dtype);
      AttentionOptions o = mode_options(mode);
      o.heads = heads;
      o.causal = true;
      for (int64_t s = 0; s < steps; ++s) {
        INFO("step " << s);
        const Tensor q = Tensor::randn({batch, 1, width}, gen, dtype);
        const Tensor k = Tensor::randn({batch, 1, width}, gen, dtype);
        const Tensor v = Tensor::randn({batch, 1, width}, gen, dtype);
        cpu_cache.append(k, v);
        gpu_cache.append(k.to(kGpu), v.to(kGpu));
        const Tensor gq = mode == AttentionMode::qknorm ? g : Tensor();
        const Tensor want = attention_step(q, cpu_cache, gq, o).out;
        const Tensor g_gpu = gq.defined() ? gq.to(kGpu) : gq;
        const Tensor got = attention_step(q.to(kGpu), gpu_cache, g_gpu, o).out;
        check_close(got, want, tolerance_for(dtype), "attention_step output");
        if (s == 2) {  // beam search reorders its hypotheses: rows 2, 0, 0
          const std::vector<int64_t> rows = {2, 0, 0};
          cpu_cache.select_rows(Tensor::from_ids(rows, {3}));
          gpu_cache.select_rows(Tensor::from_ids(rows, {3}, kGpu));
        }
      }
      // The steps in use (a reorder leaves the rest of each row unset).
      check_close(slice(gpu_cache.keys(), 1, 0, steps), slice(cpu_cache.keys(), 1, 0, steps), tolerance_for(dtype),
                  "cached keys");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3. The random kernels: bit-identical to the CPU
// ---------------------------------------------------------------------------------------------

TEST_CASE("cuda: dropout masks and values are bit-identical to the CPU's (forward and backward)",
          "[cuda]") {
  if (skip_without_gpu()) return;
  // Sizes around the 4 words of a Philox block, and past one grid-stride pass.
  const std::vector<int64_t> sizes = {0, 1, 3, 5, 7, 13, 1001, 4099, (int64_t{1} << 20) + 3};
  for (DType dtype : {DType::f32, DType::f64}) {
    for (int64_t n : sizes) {
      for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{987654321}}) {
        for (double p : {0.1, 0.5}) {
          INFO(dtype_name(dtype) << ", n " << n << ", seed " << seed << ", p " << p);
          Generator data(seed + 100);
          const Tensor x = Tensor::uniform({n}, 0.5, 1.5, data, dtype);  // nonzero: the mask shows
          // Two generators at the same stream position (an offset as after earlier draws).
          Generator g_cpu(seed, 3), g_gpu(seed, 3);
          g_cpu.set_offset(seed % 1000);
          g_gpu.set_offset(seed % 1000);
          const Tensor seed_grad = Tensor::uniform({n}, -1, 1, data, dtype);
          // Forward, then backward (which regenerates the mask), one device after the other:
          // a backward runs and clears the whole tape.
          const Tensor x_cpu = x.detach().requires_grad_();
          const Tensor y_cpu = dropout(x_cpu, p, g_cpu);
          y_cpu.backward(seed_grad);
          const Tensor x_gpu = x.to(kGpu).requires_grad_();
          const Tensor y_gpu = dropout(x_gpu, p, g_gpu);
          y_gpu.backward(seed_grad.to(kGpu));
          check_identical(y_gpu, y_cpu, "dropout output");
          check_identical(x_gpu.grad(), x_cpu.grad(), "dropout gradient");
          CHECK(g_gpu.offset() == g_cpu.offset());
        }
      }
    }
  }
  // A 3-D tensor: the stream index is the flat index.
  Generator data(5), g_cpu(6), g_gpu(6);
  const Tensor x = Tensor::randn({3, 5, 7}, data);
  check_identical(dropout(x.to(kGpu), 0.3, g_gpu), dropout(x, 0.3, g_cpu), "dropout of [3, 5, 7]");
}

TEST_CASE("cuda: word dropout is bit-identical to the CPU's", "[cuda]") {
  if (skip_without_gpu()) return;
  for (int64_t n : {0, 1, 3, 5, 7, 13, 1001, 4099, 100003}) {
    std::vector<int64_t> ids(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = 4 + (i * 31) % 97;
    const Tensor cpu_ids = Tensor::from_ids(ids, {n});
    const Tensor gpu_ids = cpu_ids.to(kGpu);
    for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{31337}}) {
      for (double p : {0.1, 0.5, 1.0}) {
        INFO("n " << n << ", seed " << seed << ", p " << p);
        Generator g_cpu(seed, 2), g_gpu(seed, 2);
        g_cpu.set_offset(seed);
        g_gpu.set_offset(seed);
        check_identical(word_dropout(gpu_ids, p, 3, g_gpu), word_dropout(cpu_ids, p, 3, g_cpu),
                        "word dropout");
        CHECK(g_gpu.offset() == g_cpu.offset());
      }
    }
  }
  // Ids of a [B, T] batch, as the Transformer uses them.
  Generator g_cpu(9, 2), g_gpu(9, 2);
  const Tensor batch = Tensor::from_ids(scrambled_ids(6 * 11, 50), {6, 11});
  check_identical(word_dropout(batch.to(kGpu), 0.1, 3, g_gpu), word_dropout(batch, 0.1, 3, g_cpu),
                  "word dropout of [6, 11]");
}

// ---------------------------------------------------------------------------------------------
// 4. Optimizers and clipping
// ---------------------------------------------------------------------------------------------

namespace {

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(std::vector<NamedTensor>)>;

// Five steps of an optimizer minimising Σ (x Wᵀ + b − y)² on each device from the same start,
// with the gradients clipped to norm 0.5 (so that clipping scales them). Compares the clipped
// norms, the parameters after every step and the optimizer state at the end.
void compare_optimizer(const std::string& what, const MakeOptimizer& make) {
  for (DType dtype : {DType::f64, DType::f32}) {
    INFO(what << " in " << dtype_name(dtype));
    Generator gen(21);
    const Tensor w0 = Tensor::randn({5, 7}, gen, DType::f64);
    const Tensor b0 = Tensor::randn({5}, gen, DType::f64);
    const Tensor x0 = Tensor::randn({11, 7}, gen, DType::f64);
    const Tensor y0 = Tensor::randn({11, 5}, gen, DType::f64);
    struct Side {
      Tensor w, b, x, y;
      std::unique_ptr<Optimizer> opt;
    };
    auto make_side = [&](Device device) {
      Side s;
      // clone(): the optimizer updates in place, and to() may return w0 itself (f64, cpu).
      s.w = w0.to(dtype).to(device).clone().requires_grad_();
      s.b = b0.to(dtype).to(device).clone().requires_grad_();
      s.x = x0.to(dtype).to(device);
      s.y = y0.to(dtype).to(device);
      s.opt = make({{"layer.weight", s.w}, {"layer.bias", s.b}});
      return s;
    };
    Side cpu = make_side(Device::cpu), gpu = make_side(kGpu);
    // Parameters: the same update arithmetic on both sides, FMA-contracted on the GPU, from
    // gradients equal to rounding: tolerance_for(dtype) (float32 parameters are O(1)).
    const Tolerance tol = tolerance_for(dtype);
    for (int step = 1; step <= 5; ++step) {
      INFO("step " << step);
      double norms[2];
      int side_index = 0;
      for (Side* s : {&cpu, &gpu}) {
        s->opt->zero_grad();
        sum(square(linear(s->x, s->w, s->b) - s->y)).backward();
        norms[side_index++] = clip_grad_norm({s->w, s->b}, 0.5);
        s->opt->step();
      }
      // ‖g‖ in float64 from float32 or float64 gradients: relative tolerance as above.
      CHECK(std::fabs(norms[1] - norms[0]) <= tol.rtol * std::fabs(norms[0]));
      check_close(gpu.w, cpu.w, tol, "weight");
      check_close(gpu.b, cpu.b, tol, "bias");
    }
    const std::vector<NamedTensor> cpu_state = cpu.opt->state_tensors();
    const std::vector<NamedTensor> gpu_state = gpu.opt->state_tensors();
    REQUIRE(cpu_state.size() == gpu_state.size());
    for (std::size_t i = 0; i < cpu_state.size(); ++i) {
      CHECK(gpu_state[i].first == cpu_state[i].first);
      CHECK(gpu_state[i].second.device() == kGpu);
      check_close(gpu_state[i].second, cpu_state[i].second, tol, "state " + cpu_state[i].first);
    }
  }
}

}  // namespace

TEST_CASE("cuda: Adam, AdamW and SGD steps on GPU parameters equal the CPU's", "[cuda]") {
  if (skip_without_gpu()) return;
  compare_optimizer("Adam", [](std::vector<NamedTensor> p) {
    AdamOptions o;
    o.lr = 0.05;
    return std::make_unique<Adam>(std::move(p), o);
  });
  compare_optimizer("Adam, L2 weight decay 0.01 (not on the bias)", [](std::vector<NamedTensor> p) {
    AdamOptions o;
    o.lr = 0.05;
    o.weight_decay = 0.01;
    o.no_decay = {"bias"};
    return std::make_unique<Adam>(std::move(p), o);
  });
  compare_optimizer("AdamW (decoupled weight decay 0.1)", [](std::vector<NamedTensor> p) {
    return std::make_unique<Adam>(std::move(p), adamw(0.05, 0.1));
  });
  compare_optimizer("SGD with momentum 0.9 and weight decay 1e-3", [](std::vector<NamedTensor> p) {
    return std::make_unique<SGD>(std::move(p), 0.05, 0.9, 1e-3);
  });
  compare_optimizer("plain SGD", [](std::vector<NamedTensor> p) {
    return std::make_unique<SGD>(std::move(p), 0.05);
  });
}

// ---------------------------------------------------------------------------------------------
// 5, 6. The Transformer end to end; determinism; the caching allocator
// ---------------------------------------------------------------------------------------------

namespace {

// A small model with every kind of dropout on, so that the Philox streams are exercised.
TransformerConfig small_config(AttentionMode mode, NormType norm, DType dtype) {
  TransformerConfig c;
  c.vocab = 4 + 10;  // toy_seq2seq.h's symbols
  c.d_model = 32;
  c.heads = 4;
  c.ffn = 64;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.attention = mode;
  c.norm = norm;
  c.per_head_g = mode == AttentionMode::qknorm && norm == NormType::scale_norm;
  c.qknorm_length = 9;
  c.dropout = c.attention_dropout = c.ffn_dropout = c.word_dropout = 0.1;
  c.seed = 5;
  c.dtype = dtype;
  return c;
}

std::string describe_config(const TransformerConfig& c) {
  return cat(mode_name(c.attention), c.norm == NormType::layer_norm ? ", LayerNorm" : ", ScaleNorm",
             c.per_head_g ? ", g per head" : "", ", ", dtype_name(c.dtype));
}

// One training step after another on the model's device: cross-entropy with label smoothing
// 0.1 (pad ignored), backward, clipping to norm 1, AdamW.
class Trainer {
 public:
  Trainer(Seq2SeqTransformer& model, const toy::Batch& batch)
      : model_(model),
        batch_(batch),
        src_(batch.src.to(model.device())),
        tgt_in_(batch.tgt_in.to(model.device())),
        tgt_out_(batch.tgt_out.to(model.device())),
        params_(model.parameters()),
        opt_(model.named_parameters(), adamw(3e-3, 0.01, {"bias", "norm", ".g"})) {
    model_.train();
  }

  struct Step {
    double loss, grad_norm;
  };
  Step step() {
    opt_.zero_grad();
    const Tensor logits = model_.forward(src_, batch_.src_lengths, tgt_in_, batch_.tgt_lengths);
    const LossSum loss = cross_entropy(logits, tgt_out_, 0.1, /*ignore pad*/ 0);
    const Tensor mean_loss = loss.sum / static_cast<double>(loss.tokens);
    mean_loss.backward();
    const double grad_norm = clip_grad_norm(params_, 1.0);
    opt_.step();
    return {mean_loss.item(), grad_norm};
  }

 private:
  Seq2SeqTransformer& model_;
  const toy::Batch& batch_;
  Tensor src_, tgt_in_, tgt_out_;
  std::vector<Tensor> params_;
  Adam opt_;
};

std::vector<Trainer::Step> train_steps(Seq2SeqTransformer& model, const toy::Batch& batch,
                                       int steps) {
  Trainer trainer(model, batch);
  std::vector<Trainer::Step> out;
  for (int i = 0; i < steps; ++i) out.push_back(trainer.step());
  return out;
}

toy::Batch small_batch() {
  Generator data(11, 1);
  return toy::make_batch(data, 8, 10, 3, 8, /*reverse=*/true);
}

// The parameters of two models: the same names; values identical, or within rel of each other.
void compare_parameters(const Module& got, const Module& want, double rel,
                        const std::string& what) {
  const std::vector<NamedTensor> a = got.named_parameters(), b = want.named_parameters();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(what << ": parameter " << b[i].first);
    CHECK(a[i].first == b[i].first);
    if (rel == 0) {
      check_identical(a[i].second, b[i].second, b[i].first);
    } else {
      check_close(a[i].second, b[i].second, Tolerance{rel, 0}, b[i].first);
    }
  }
}

// The same model from the same seed on the CPU and the GPU: initial parameters, then 5
// training steps.
void compare_training(const TransformerConfig& c) {
  INFO(describe_config(c));
  const toy::Batch batch = small_batch();
  const bool f32 = c.dtype == DType::f32;
  Seq2SeqTransformer cpu(c, Device::cpu), gpu(c, kGpu);
  CHECK(gpu.device() == kGpu);
  for (const Tensor& p : gpu.parameters()) CHECK(p.device() == kGpu);
  // Initial parameters from the same Philox stream. float32: identical (Box-Muller runs in
  // double on both devices; a last-bit difference of CUDA's log/cos survives the rounding to
  // float with probability ~1e-8 per element). float64: that last bit shows, so 1e-12 relative.
  compare_parameters(gpu, cpu, f32 ? 0.0 : 1e-12, "initial parameters");
  const auto want = train_steps(cpu, batch, 5);
  const auto got = train_steps(gpu, batch, 5);
  // Losses and gradient norms: the same dropout masks and word dropout, the arithmetic equal to
  // rounding; five AdamW steps keep the two models within rounding of each other: 1e-4
  // relative in float32, 1e-8 in float64 (Adam's m/√v can amplify the difference of
  // nearly-zero gradients, still far below these).
  const double rel = f32 ? 1e-4 : 1e-8;
  // The evidence, printed whether or not the checks pass (scripts/gpu_check.sh keeps it).
  std::printf("5 training steps, %s\n", describe_config(c).c_str());
  for (std::size_t i = 0; i < want.size(); ++i) {
    std::printf("  step %zu: loss gpu %.9g cpu %.9g (rel. diff %.2e); gradient norm gpu %.9g cpu %.9g\n", i + 1,
                got[i].loss, want[i].loss, std::fabs(got[i].loss - want[i].loss) / std::fabs(want[i].loss),
                got[i].grad_norm, want[i].grad_norm);
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("step " << i + 1 << ": loss gpu " << num(got[i].loss) << ", cpu " << num(want[i].loss)
                 << "; gradient norm gpu " << num(got[i].grad_norm) << ", cpu "
                 << num(want[i].grad_norm));
    CHECK(std::isfinite(got[i].loss));
    CHECK(std::fabs(got[i].loss - want[i].loss) <= rel * std::fabs(want[i].loss));
    CHECK(std::fabs(got[i].grad_norm - want[i].grad_norm) <= rel * std::fabs(want[i].grad_norm));
  }
}

}  // namespace

TEST_CASE("cuda: the Transformer trained 5 steps on the GPU matches the CPU (dropout, smoothing, "
          "clipping, AdamW)", "[cuda]") {
  if (skip_without_gpu()) return;
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    for (NormType norm : {NormType::layer_norm, NormType::scale_norm}) {
      compare_training(small_config(mode, norm, DType::f32));
    }
  }
  // Today's QK-norm forms: per-head RMSNorm / LayerNorm (the fused row ops) before the kernel.
  for (AttentionMode mode : {AttentionMode::rms_qknorm, AttentionMode::layer_qknorm}) {
    compare_training(small_config(mode, NormType::layer_norm, DType::f32));
  }
  compare_training(small_config(AttentionMode::qknorm, NormType::layer_norm, DType::f64));
}

TEST_CASE("cuda: incremental decoding on the GPU (caches, cross-attention memory, reorder) "
          "matches the CPU", "[cuda]") {
  if (skip_without_gpu()) return;
  const toy::Batch batch = small_batch();
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    const TransformerConfig c = small_config(mode, NormType::layer_norm, DType::f32);
    INFO(describe_config(c));
    Seq2SeqTransformer cpu(c, Device::cpu), gpu(c, kGpu);
    cpu.eval();
    gpu.eval();
    NoGradGuard no_grad;
    const int64_t rows = batch.src.size(0), steps = 6;
    auto state_cpu = cpu.start_decoding(cpu.encode(batch.src, batch.src_lengths),
                                        batch.src_lengths, steps);
    auto state_gpu = gpu.start_decoding(gpu.encode(batch.src.to(kGpu), batch.src_lengths),
                                        batch.src_lengths, steps);
    // The same forced tokens on both (the targets' first columns), so that a near-tie in an
    // argmax cannot make the two decodings part.
    std::vector<int64_t> tokens(static_cast<std::size_t>(rows), c.bos_id);
    int64_t live = rows;  // the batch's rows now
    for (int64_t s = 0; s < steps; ++s) {
      INFO("step " << s);
      const Tensor t = Tensor::from_ids(tokens, {live});
      // Logits through a few layers of float32 arithmetic: kFloat32.
      check_close(gpu.decode_step(state_gpu, t.to(kGpu)), cpu.decode_step(state_cpu, t),
                  kFloat32, "logits");
      if (s == 2) {  // a beam-search reordering: every row takes the state of row (r + 3) % B
        std::vector<int64_t> order;
        for (int64_t r = 0; r < rows; ++r) order.push_back((r + 3) % rows);
        cpu.reorder(state_cpu, Tensor::from_ids(order, {rows}));
        gpu.reorder(state_gpu, Tensor::from_ids(order, {rows}, kGpu));
      }
      if (s == 3) {  // finished sentences leave the batch: rows 2 and 0 stay, in that order
        live = 2;
        cpu.reorder(state_cpu, Tensor::from_ids({2, 0}, {live}));
        gpu.reorder(state_gpu, Tensor::from_ids({2, 0}, {live}, kGpu));
        tokens.resize(static_cast<std::size_t>(live));
      }
      const std::vector<int64_t> column = batch.tgt_out.to_ids();
      for (int64_t r = 0; r < live; ++r) {
        tokens[static_cast<std::size_t>(r)] =
            column[static_cast<std::size_t>(r * batch.tgt_out.size(1) + s % batch.tgt_out.size(1))];
      }
    }
  }
}

TEST_CASE("cuda: training is deterministic: two GPU runs give bit-identical losses and parameters",
          "[cuda]") {
  if (skip_without_gpu()) return;
  const toy::Batch batch = small_batch();
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    const TransformerConfig c = small_config(mode, NormType::layer_norm, DType::f32);
    INFO(describe_config(c));
    Seq2SeqTransformer first(c, kGpu), second(c, kGpu);
    const auto a = train_steps(first, batch, 5);
    const auto b = train_steps(second, batch, 5);
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("step " << i + 1 << ": " << num(a[i].loss) << " vs " << num(b[i].loss));
      CHECK(a[i].loss == b[i].loss);  // no atomics, fixed reduction order: bit for bit
      CHECK(a[i].grad_norm == b[i].grad_norm);
    }
    compare_parameters(second, first, 0.0, "after 5 steps");
  }
}

TEST_CASE("cuda: after two warm-up steps, training makes no system allocation (caching allocator)",
          "[cuda]") {
  if (skip_without_gpu()) return;
  const toy::Batch batch = small_batch();
  Seq2SeqTransformer model(small_config(AttentionMode::qknorm, NormType::layer_norm, DType::f32),
                           kGpu);
  Trainer trainer(model, batch);
  trainer.step();
  trainer.step();
  const AllocatorStats before = backend(kGpu).allocator_stats();
  for (int i = 0; i < 3; ++i) trainer.step();
  const AllocatorStats after = backend(kGpu).allocator_stats();
  INFO("system allocations " << before.system_allocations << " -> " << after.system_allocations
                             << ", cache hits " << before.cache_hits << " -> " << after.cache_hits
                             << ", bytes in use " << before.bytes_in_use << " -> "
                             << after.bytes_in_use << ", cached " << after.bytes_cached);
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.cache_hits > before.cache_hits);
  CHECK(after.bytes_in_use == before.bytes_in_use);  // nothing leaks from step to step
}

// What the trainer does at every evaluation: save_checkpoint reads every parameter on the host
// (to refuse a non-finite state) while the parameters still require grad. The first run on a
// GPU (2026-12-04) stopped there: Tensor::to refused to move a tensor that requires grad.
TEST_CASE("cuda: a checkpoint of a GPU model in training saves and loads; a NaN is refused by name",
          "[cuda]") {
  if (skip_without_gpu()) return;
  const TransformerConfig c = small_config(AttentionMode::qknorm, NormType::layer_norm, DType::f32);
  Seq2SeqTransformer gpu(c, kGpu);
  train_steps(gpu, small_batch(), 1);
  for (const Tensor& p : gpu.parameters()) REQUIRE(p.requires_grad());
  char name[] = "/tmp/qkgrad-cuda-checkpoint-XXXXXX";
  REQUIRE(::mkdtemp(name) != nullptr);
  const std::string dir = std::string(name) + "/ckpt";
  save_checkpoint(dir, gpu, nullptr);
  Seq2SeqTransformer loaded(load_checkpoint_config(dir));
  load_model_weights(dir, loaded);
  compare_parameters(loaded, gpu, 0.0, "saved on the GPU, loaded on the CPU");
  // A NaN in a GPU parameter: refused, naming the tensor and the element.
  const NamedTensor first = gpu.named_parameters().front();
  {
    NoGradGuard no_grad;
    Tensor w = first.second;
    w.fill_(std::nan(""));
  }
  CHECK_THROWS_WITH(save_checkpoint(dir, gpu, nullptr),
                    Contains("tensor '" + first.first + "'") && Contains("NaN at element 0"));
  std::filesystem::remove_all(name);
}

// ---------------------------------------------------------------------------------------------
// 7. Errors
// ---------------------------------------------------------------------------------------------

TEST_CASE("cuda: an op mixing a CPU and a CUDA tensor fails with a clear error", "[cuda]") {
  if (skip_without_gpu()) return;
  if (skip_in_dry_run()) return;
  Generator gen(3);
  const Tensor a = Tensor::randn({2, 3}, gen), a_gpu = a.to(kGpu);
  const Tensor w = Tensor::randn({4, 3}, gen), w_gpu = w.to(kGpu);
  CHECK_THROWS_WITH(a + a_gpu, Contains("devices differ") && Contains("cuda"));
  CHECK_THROWS_WITH(a_gpu * a, Contains("devices differ"));
  CHECK_THROWS_WITH(matmul(a_gpu, w, false, true), Contains("matmul: devices differ"));
  CHECK_THROWS_WITH(linear(a_gpu, w), Contains("linear: devices differ"));
  CHECK_THROWS_WITH(concat({a, a_gpu}, 0), Contains("concat: devices differ"));
  const Tensor ones = Tensor::ones({3}), zeros = Tensor::zeros({3});
  CHECK_THROWS_WITH(layer_norm(a_gpu, ones, zeros), Contains("layer_norm: devices differ"));
  CHECK_THROWS_WITH(where(Tensor::ones({2, 3}), a_gpu, a_gpu),
                    Contains("where: the mask is on cpu"));
  CHECK_THROWS_WITH(embedding(w_gpu, Tensor::from_ids({0, 1}, {2})),
                    Contains("embedding: ids are on cpu but the weight is on cuda"));
  CHECK_THROWS_WITH(index_select(w_gpu, 0, Tensor::from_ids({0, 1}, {2})),
                    Contains("ids are on cpu"));
  CHECK_THROWS_WITH(cross_entropy(a_gpu, Tensor::from_ids({0, 1}, {2})),
                    Contains("targets are on cpu but the scores are on cuda"));
  const Tensor q = Tensor::randn({1, 2, 4}, gen);
  AttentionOptions o;
  o.mode = AttentionMode::scaled_dot;
  CHECK_THROWS_WITH(attention(q.to(kGpu), q, q.to(kGpu), Tensor(), o),
                    Contains("attention: devices differ"));
  KVCache cache(1, 4, 4, DType::f32, kGpu);
  CHECK_THROWS_WITH(cache.append(q, q), Contains("KVCache::append: devices differ"));
  // A model on the GPU refuses token ids on the cpu (nn/transformer.cpp).
  TransformerConfig c = small_config(AttentionMode::qknorm, NormType::layer_norm, DType::f32);
  Seq2SeqTransformer model(c, kGpu);
  const toy::Batch batch = small_batch();
  CHECK_THROWS_WITH(model.forward(batch.src, batch.src_lengths, batch.tgt_in.to(kGpu),
                                  batch.tgt_lengths),
                    Contains("is not on the model's device"));
  tape().clear();
  // Gradients: the seed must be on the output's device; moving a leaf that requires grad is
  // refused (not differentiable).
  const Tensor leaf = a.to(kGpu).requires_grad_();
  const Tensor y = leaf * 2.0;
  CHECK_THROWS_WITH(y.backward(Tensor::ones({2, 3})), Contains("seed gradient"));
  tape().clear();
  CHECK_THROWS_WITH(leaf.to(Device::cpu), Contains("not differentiable"));
}
