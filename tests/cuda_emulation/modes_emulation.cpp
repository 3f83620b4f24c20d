// The QK-norm modes of today's models, rms_qknorm and layer_qknorm, as the CUDA backend runs
// them: the norm kernels of backends/cuda/cuda_norm.cu over each head's rows of q and k, then
// the scaled-dot attention kernels of cuda_attention.cu on q̂ and k̂, and back through both
// (what ops/attention.cpp asks of the backend, with the gains shared by the heads). All in the
// host emulation of emu.h, against the CPU's attention op in that mode (out, and the gradients
// of q, k, v and of every gain and bias, by autograd), in float64 and float32. Built and run by
// tests/cuda_emulation/run.sh.
//
//   modes_emulation
//
// Prints one line per configuration and dtype, then "N passed, N failed"; exits 1 on a failure.
#include <cmath>
#include <random>
#include <string>

#include "attention_host.h"
#include "compare.h"
#include "core/autograd.h"
#include "norm_host.h"
#include "ops/ops.h"

using namespace qkgrad;
using namespace qkgrad::emulation;

namespace {

struct Case {
  std::string name;
  AttentionMode mode;
  int64_t batch, heads, tq, tk, kv_time, d;  // kv_time > tk: a KV cache of which tk keys are used
  bool causal = false;
  int64_t query_offset = 0;
  std::vector<int64_t> key_lengths = {};
};

// The first `time` steps of x [B, T, W] (a contiguous copy).
Tensor first_steps(const Tensor& x, int64_t time) {
  const int64_t B = x.size(0), T = x.size(1), W = x.size(2);
  const std::vector<double> all = x.to_vector();
  std::vector<double> part;
  for (int64_t b = 0; b < B; ++b) {
    const auto begin = all.begin() + b * T * W;
    part.insert(part.end(), begin, begin + time * W);
  }
  return Tensor::from_vector(part, {B, time, W}, x.dtype());
}

// The gains (and biases) of one of q, k: [d].
struct Norm {
  Tensor gain, bias;
};

// The emulated GPU forward of one norm over the heads' rows x [B, T, H, d]: y and what the
// backward keeps (mean for layer norm, rstd).
struct NormRun {
  Tensor y, mean, rstd;
};
NormRun emu_norm_forward(AttentionMode mode, const Tensor& x, const Norm& n, double eps) {
  const int64_t rows = x.numel() / x.size(3);
  NormRun r{Tensor::full(x.shape(), 777, x.dtype()), Tensor::full({rows}, 777, x.dtype()),
            Tensor::full({rows}, 777, x.dtype())};
  if (mode == AttentionMode::rms_qknorm) {
    emu_norm::emu_rms_norm(x, n.gain, eps, r.y, r.rstd);
  } else {
    emu_norm::emu_layer_norm(x, n.gain, n.bias, eps, r.y, r.mean, r.rstd);
  }
  return r;
}

// The emulated GPU backward of that norm: dx, and the gain's (and bias's) gradients.
struct NormGrads {
  Tensor dx, dgain, dbias;
};
NormGrads emu_norm_backward(AttentionMode mode, const Tensor& x, const Norm& n, const NormRun& r, const Tensor& dy) {
  const int64_t d = x.size(3);
  NormGrads g{Tensor::full(x.shape(), 777, x.dtype()), Tensor::full({d}, 777, x.dtype()),
              Tensor::full({d}, 777, x.dtype())};
  if (mode == AttentionMode::rms_qknorm) {
    emu_norm::emu_rms_norm_backward(x, n.gain, r.rstd, dy, &g.dx, &g.dgain);
  } else {
    emu_norm::emu_layer_norm_backward(x, n.gain, r.mean, r.rstd, dy, &g.dx, &g.dgain, &g.dbias);
  }
  return g;
}

std::vector<std::string> run_case(const Case& c, DType dtype, std::mt19937& rng) {
  const double tol = dtype == DType::f64 ? 1e-11 : 2e-4;
  const bool layer = c.mode == AttentionMode::layer_qknorm;
  const int64_t B = c.batch, H = c.heads, d = c.d, W = H * d;
  Tensor q = random_tensor({B, c.tq, W}, dtype, rng).requires_grad_();       // [B, tq, H·d]
  Tensor k = random_tensor({B, c.kv_time, W}, dtype, rng).requires_grad_();  // [B, kv_time, H·d]
  Tensor v = random_tensor({B, c.kv_time, W}, dtype, rng).requires_grad_();  // [B, kv_time, H·d]
  const Tensor dout = random_tensor({B, c.tq, W}, dtype, rng);                // [B, tq, H·d]
  auto parameter = [&](double mean) { return (random_tensor({d}, dtype, rng, 0.3) + mean).detach().requires_grad_(); };
  Norm qn{parameter(1.0), layer ? parameter(0.0) : Tensor()}, kn{parameter(1.0), layer ? parameter(0.0) : Tensor()};

  // The CPU op, and autograd for the gradients.
  AttentionOptions o;
  o.heads = H;
  o.mode = c.mode;
  o.causal = c.causal;
  o.query_offset = c.query_offset;
  o.key_lengths = c.key_lengths;
  if (c.kv_time > c.tk) o.kv_length = c.tk;
  AttentionParams params;
  params.q_gain = qn.gain;
  params.k_gain = kn.gain;
  params.q_bias = qn.bias;
  params.k_bias = kn.bias;
  const Tensor want_out = attention(q, k, v, params, o).out;
  want_out.backward(dout);

  // The GPU's way, emulated: the norms over the heads' rows, then scaled-dot attention.
  const Tensor q4 = q.detach().reshape({B, c.tq, H, d});                     // [B, tq, H, d]
  const Tensor k4 = first_steps(k.detach(), c.tk).reshape({B, c.tk, H, d});  // [B, tk, H, d]
  const Tensor v_used = first_steps(v.detach(), c.tk);                       // [B, tk, H·d]
  const NormRun qr = emu_norm_forward(c.mode, q4, qn, o.eps), kr = emu_norm_forward(c.mode, k4, kn, o.eps);
  const Tensor q_hat = qr.y.reshape({B, c.tq, W}), k_hat = kr.y.reshape({B, c.tk, W});
  AttentionSpec s;
  s.batch = B;
  s.heads = H;
  s.tq = c.tq;
  s.tk = s.kv_time = c.tk;
  s.head_dim = d;
  s.mode = AttentionMode::scaled_dot;
  s.scale = 1.0 / std::sqrt(static_cast<double>(d));
  s.causal = c.causal;
  s.query_offset = c.query_offset;
  s.key_lengths = c.key_lengths;
  Tensor out = Tensor::full(q.shape(), 777, dtype);
  AttentionState state{Tensor(), Tensor::full({B, H, c.tq}, 777, dtype), Tensor(), Tensor()};
  emu_attention::emu_attention_forward(s, q_hat, k_hat, v_used, nullptr, out, state);
  AttentionGrads hat{Tensor::full(q.shape(), 777, dtype), Tensor::full(k_hat.shape(), 777, dtype),
                     Tensor::full(v_used.shape(), 777, dtype), Tensor()};
  emu_attention::emu_attention_backward(s, q_hat, k_hat, v_used, nullptr, out, state, dout, hat);
  const NormGrads qg = emu_norm_backward(c.mode, q4, qn, qr, hat.dq.reshape(q4.shape()));
  const NormGrads kg = emu_norm_backward(c.mode, k4, kn, kr, hat.dk.reshape(k4.shape()));

  Failures f;
  f.check("out", out, want_out, tol);
  f.check("dq", qg.dx.reshape(q.shape()), q.grad(), tol);
  f.check("dk (the keys in use)", kg.dx.reshape({B, c.tk, W}), first_steps(k.grad(), c.tk), tol);
  f.check("dv (the keys in use)", hat.dv, first_steps(v.grad(), c.tk), tol);
  f.check("q gain", qg.dgain, qn.gain.grad(), 10 * tol);  // sums over every row
  f.check("k gain", kg.dgain, kn.gain.grad(), 10 * tol);
  if (layer) {
    f.check("q bias", qg.dbias, qn.bias.grad(), 10 * tol);
    f.check("k bias", kg.dbias, kn.bias.grad(), 10 * tol);
  }
  return f.messages;
}

std::vector<Case> cases() {
  std::vector<Case> list;
  for (AttentionMode mode : {AttentionMode::rms_qknorm, AttentionMode::layer_qknorm}) {
    const std::string m = std::string(attention_mode_name(mode)) + ": ";
    Case causal{m + "causal cross-attention tq4 tk6, query offset 2, padding 4, 0 (a fully masked entry)", mode,
                2, 2, 4, 6, 6, 5};
    causal.causal = true;
    causal.query_offset = 2;
    causal.key_lengths = {4, 0};
    list.push_back(causal);
    Case cache{m + "KV cache: 6 of 9 steps, causal offset 5", mode, 1, 2, 1, 6, 9, 8};
    cache.causal = true;
    cache.query_offset = 5;
    list.push_back(cache);
    list.push_back({m + "the model's heads: H4 d32", mode, 1, 4, 3, 3, 3, 32});
  }
  return list;
}

}  // namespace

int main() {
  std::mt19937 rng(42);
  Report report;
  for (const Case& c : cases()) {
    for (DType dtype : {DType::f64, DType::f32}) report.add(c.name, dtype, run_case(c, dtype, rng));
  }
  return report.finish();
}
