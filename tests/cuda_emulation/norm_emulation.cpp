// The CUDA row kernels of backends/cuda/cuda_norm.cu (softmax and log_softmax, layer norm,
// RMSNorm, l2 normalisation; forward and backward, with layer norm's and RMSNorm's parameter
// gradients), run in the host emulation of emu.h against the CPU backend on the same inputs, in
// float64 and float32. The shapes cover one thread per element and rows longer than a block
// (1,030 values: 1,024 threads, each looping), the parameter gradients' partial sums over one,
// two and three blocks of 32 rows, empty tensors, and the rows of the QK-norm modes
// ([B, T, H, d] heads); the special rows cover -inf and NaN in softmax and zero or tiny rows in
// the norms (below eps). Every CUDA thread is a host thread, so the shapes are kept small. Built
// and run by tests/cuda_emulation/run.sh.
//
//   norm_emulation
//
// Prints one line per configuration and dtype, then "N passed, N failed"; exits 1 on a failure.
#include <cmath>
#include <random>
#include <string>

#include "compare.h"
#include "norm_host.h"

using namespace qkgrad;
using namespace qkgrad::emulation;
namespace gpu = qkgrad::emu_norm;

namespace {

struct Case {
  std::string name;
  Shape shape;              // x; the rows are its last dimension
  bool special = false;     // softmax: a row of -inf, a row with some -inf, a NaN; norms: a zero row and a tiny row
};

int64_t last_dim(const Shape& s) { return s.rank() == 0 ? 1 : s[s.rank() - 1]; }
int64_t rows_of(const Shape& s) { return last_dim(s) == 0 ? 0 : s.numel() / last_dim(s); }

// Softmax and log_softmax, forward and backward. x with `special`: row 0 all -inf, row 1 half
// -inf, row 2 one NaN.
void check_softmax(const Case& c, DType dtype, std::mt19937& rng, double tol, Failures& f) {
  Tensor x = random_tensor(c.shape, dtype, rng, 3.0);
  const int64_t d = last_dim(c.shape), rows = rows_of(c.shape);
  if (c.special && rows >= 3) {
    std::vector<double> v = x.to_vector();
    for (int64_t j = 0; j < d; ++j) v[static_cast<std::size_t>(j)] = -INFINITY;
    for (int64_t j = 0; j < d; j += 2) v[static_cast<std::size_t>(d + j)] = -INFINITY;
    v[static_cast<std::size_t>(2 * d + d / 2)] = NAN;
    x = Tensor::from_vector(v, c.shape, dtype);
  }
  const Tensor dy = random_tensor(c.shape, dtype, rng);
  for (bool log : {false, true}) {
    Tensor want = Tensor::full(c.shape, 777, dtype), got = Tensor::full(c.shape, 777, dtype);
    backend(Device::cpu).softmax(x, want, log);
    gpu::emu_softmax(x, got, log);
    f.check(log ? "log_softmax y" : "softmax y", got, want, tol);
    Tensor want_dx = Tensor::full(c.shape, 777, dtype), got_dx = Tensor::full(c.shape, 777, dtype);
    backend(Device::cpu).softmax_backward(want, dy, want_dx, log);
    gpu::emu_softmax_backward(want, dy, got_dx, log);
    f.check(log ? "log_softmax dx" : "softmax dx", got_dx, want_dx, tol);
  }
}

// x for the norms: with `special`, row 0 is zero and row 1 is tiny (1e-9), below every eps.
Tensor norm_input(const Case& c, DType dtype, std::mt19937& rng) {
  Tensor x = random_tensor(c.shape, dtype, rng, 2.0);
  const int64_t d = last_dim(c.shape), rows = rows_of(c.shape);
  if (!c.special || rows < 2) return x;
  std::vector<double> v = x.to_vector();
  for (int64_t j = 0; j < d; ++j) {
    v[static_cast<std::size_t>(j)] = 0.0;
    v[static_cast<std::size_t>(d + j)] *= 1e-9;
  }
  return Tensor::from_vector(v, c.shape, dtype);
}

// Layer norm: y, mean, rstd; then dx, dgamma, dbeta together, and dgamma alone (dx and dbeta
// not asked for), and dx alone.
void check_layer_norm(const Case& c, DType dtype, std::mt19937& rng, double tol, Failures& f) {
  const Tensor x = norm_input(c, dtype, rng), dy = random_tensor(c.shape, dtype, rng);
  const int64_t d = last_dim(c.shape), rows = rows_of(c.shape);
  const Tensor gamma = random_tensor({d}, dtype, rng), beta = random_tensor({d}, dtype, rng);  // [d]
  auto filled = [&](const Shape& s) { return Tensor::full(s, 777, dtype); };
  Tensor y = filled(c.shape), mean = filled({rows}), rstd = filled({rows});
  Tensor got_y = filled(c.shape), got_mean = filled({rows}), got_rstd = filled({rows});
  backend(Device::cpu).layer_norm(x, gamma, beta, 1e-5, y, mean, rstd);
  gpu::emu_layer_norm(x, gamma, beta, 1e-5, got_y, got_mean, got_rstd);
  f.check("layer_norm y", got_y, y, tol);
  f.check("layer_norm mean", got_mean, mean, tol);
  f.check("layer_norm rstd", got_rstd, rstd, tol);

  Tensor dx = filled(c.shape), dgamma = filled({d}), dbeta = filled({d});
  backend(Device::cpu).layer_norm_backward(x, gamma, mean, rstd, dy, &dx, &dgamma, &dbeta);
  Tensor got_dx = filled(c.shape), got_dgamma = filled({d}), got_dbeta = filled({d});
  gpu::emu_layer_norm_backward(x, gamma, got_mean, got_rstd, dy, &got_dx, &got_dgamma, &got_dbeta);
  f.check("layer_norm dx", got_dx, dx, tol);
  f.check("layer_norm dgamma", got_dgamma, dgamma, 10 * tol);  // sums over the rows
  f.check("layer_norm dbeta", got_dbeta, dbeta, 10 * tol);
  Tensor only_dgamma = filled({d}), only_dx = filled(c.shape);
  gpu::emu_layer_norm_backward(x, gamma, got_mean, got_rstd, dy, nullptr, &only_dgamma, nullptr);
  gpu::emu_layer_norm_backward(x, gamma, got_mean, got_rstd, dy, &only_dx, nullptr, nullptr);
  f.check("layer_norm dgamma alone", only_dgamma, dgamma, 10 * tol);
  f.check("layer_norm dx alone", only_dx, dx, tol);
}

// RMSNorm: y, rstd; then dx and dgamma together, and each alone.
void check_rms_norm(const Case& c, DType dtype, std::mt19937& rng, double tol, Failures& f) {
  const Tensor x = norm_input(c, dtype, rng), dy = random_tensor(c.shape, dtype, rng);
  const int64_t d = last_dim(c.shape), rows = rows_of(c.shape);
  const Tensor gamma = random_tensor({d}, dtype, rng);  // [d]
  auto filled = [&](const Shape& s) { return Tensor::full(s, 777, dtype); };
  Tensor y = filled(c.shape), rstd = filled({rows}), got_y = filled(c.shape), got_rstd = filled({rows});
  backend(Device::cpu).rms_norm(x, gamma, 1e-6, y, rstd);
  gpu::emu_rms_norm(x, gamma, 1e-6, got_y, got_rstd);
  f.check("rms_norm y", got_y, y, tol);
  f.check("rms_norm rstd", got_rstd, rstd, tol);

  Tensor dx = filled(c.shape), dgamma = filled({d}), got_dx = filled(c.shape), got_dgamma = filled({d});
  backend(Device::cpu).rms_norm_backward(x, gamma, rstd, dy, &dx, &dgamma);
  gpu::emu_rms_norm_backward(x, gamma, got_rstd, dy, &got_dx, &got_dgamma);
  f.check("rms_norm dx", got_dx, dx, tol);
  f.check("rms_norm dgamma", got_dgamma, dgamma, 10 * tol);
  Tensor only_dgamma = filled({d}), only_dx = filled(c.shape);
  gpu::emu_rms_norm_backward(x, gamma, got_rstd, dy, nullptr, &only_dgamma);
  gpu::emu_rms_norm_backward(x, gamma, got_rstd, dy, &only_dx, nullptr);
  f.check("rms_norm dgamma alone", only_dgamma, dgamma, 10 * tol);
  f.check("rms_norm dx alone", only_dx, dx, tol);
}

// l2 normalisation (the paper's q̂ = q/‖q‖ outside the fused op): y, norm and dx.
void check_l2_normalize(const Case& c, DType dtype, std::mt19937& rng, double tol, Failures& f) {
  const Tensor x = norm_input(c, dtype, rng), dy = random_tensor(c.shape, dtype, rng);
  const int64_t rows = rows_of(c.shape);
  auto filled = [&](const Shape& s) { return Tensor::full(s, 777, dtype); };
  Tensor y = filled(c.shape), norm = filled({rows}), got_y = filled(c.shape), got_norm = filled({rows});
  backend(Device::cpu).l2_normalize(x, 1e-6, y, norm);
  gpu::emu_l2_normalize(x, 1e-6, got_y, got_norm);
  f.check("l2_normalize y", got_y, y, tol);
  f.check("l2_normalize norm", got_norm, norm, tol);
  Tensor dx = filled(c.shape), got_dx = filled(c.shape);
  backend(Device::cpu).l2_normalize_backward(y, norm, 1e-6, dy, dx);
  gpu::emu_l2_normalize_backward(y, norm, 1e-6, dy, got_dx);
  f.check("l2_normalize dx", got_dx, dx, tol);
}

std::vector<Case> cases() {
  return {
      {"1 row of 1", {1, 1}},
      {"3 rows of 5, special rows", {3, 5}, true},
      {"4 rows of 32 (a warp each)", {4, 32}},
      {"5 rows of 33, special rows", {5, 33}, true},
      {"40 rows of 20 (two blocks of 32 rows in dgamma)", {40, 20}},
      {"70 rows of 7 (three blocks, the last of 6 rows), special rows", {70, 7}, true},
      {"1 row of 300 (512 threads)", {1, 300}},
      {"3 rows of 1030 (1024 threads, each looping), special rows", {3, 1030}, true},
      {"heads of the QK-norm modes [B2, T2, H4, d32]", {2, 2, 4, 32}},
      {"0 rows of 5", {0, 5}},
      {"4 rows of 0", {4, 0}},
  };
}

}  // namespace

int main() {
  std::mt19937 rng(42);
  Report report;
  for (const Case& c : cases()) {
    for (DType dtype : {DType::f64, DType::f32}) {
      const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
      Failures f;
      check_softmax(c, dtype, rng, tol, f);
      check_layer_norm(c, dtype, rng, tol, f);
      check_rms_norm(c, dtype, rng, tol, f);
      check_l2_normalize(c, dtype, rng, tol, f);
      report.add(c.name, dtype, f.messages);
    }
  }
  return report.finish();
}
