// The CUDA attention kernels (backends/cuda/cuda_attention.cu), run in the host emulation of
// emu.h, against the CPU backend's attention on the same inputs: out, P (when asked for), rq,
// rk, and every gradient, in float64 and float32, over a list of configurations that covers
// every branch of the kernels (causal with positive and negative query offsets, padding with a
// fully masked batch entry, per-head g, dropout, KV-cache rows past tk, empty dimensions,
// zero-norm rows). Built and run by tests/cuda_emulation/run.sh; EMU_MAX_TILE and
// EMU_MAX_BLOCKS in the environment force small tiles and few blocks.
//
//   attention_emulation [--long]     --long adds rows of 300 keys and 260 queries
//
// Prints one line per configuration and dtype, then "N passed, N failed"; exits 1 on a failure.
#include <cstdio>
#include <random>
#include <string>

#include "attention_host.h"
#include "compare.h"

using namespace qkgrad;
using namespace qkgrad::emulation;
using qkgrad::emu_attention::emu_attention_backward;
using qkgrad::emu_attention::emu_attention_forward;

namespace {

struct Case {
  Case(std::string name_, int64_t batch_, int64_t heads_, int64_t tq_, int64_t tk_, int64_t kv_time_, int64_t d_)
      : name(std::move(name_)), batch(batch_), heads(heads_), tq(tq_), tk(tk_), kv_time(kv_time_), d(d_) {}
  std::string name;
  int64_t batch, heads, tq, tk, kv_time, d;
  bool qknorm = true, per_head_g = false, causal = false;
  int64_t query_offset = 0;
  std::vector<int64_t> key_lengths;
  double dropout = 0;
  bool zero_rows = false;  // q row 0 and k row 0 of batch entry 0 are zero (norm below eps)
};

// One configuration in one dtype: the emulated forward (with and without P) and backward
// against the CPU backend's. Returns the failures (empty when it passes).
std::vector<std::string> run_case(const Case& c, DType dtype, std::mt19937& rng) {
  const double tol = dtype == DType::f64 ? 1e-11 : 2e-4;
  AttentionSpec s;
  s.batch = c.batch;
  s.heads = c.heads;
  s.tq = c.tq;
  s.tk = c.tk;
  s.kv_time = c.kv_time;
  s.head_dim = c.d;
  s.mode = c.qknorm ? AttentionMode::qknorm : AttentionMode::scaled_dot;
  s.per_head_g = c.per_head_g;
  s.scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(c.d, 1)));
  s.causal = c.causal;
  s.query_offset = c.query_offset;
  s.key_lengths = c.key_lengths;
  s.dropout = c.dropout;
  s.rs = RandomStream{1234, 7, 99};
  const int64_t width = c.heads * c.d;
  Tensor q = random_tensor({c.batch, c.tq, width}, dtype, rng);        // [B, tq, H·d]
  Tensor k = random_tensor({c.batch, c.kv_time, width}, dtype, rng);   // [B, kv_time, H·d]
  Tensor v = random_tensor({c.batch, c.kv_time, width}, dtype, rng);   // [B, kv_time, H·d]
  Tensor dout = random_tensor({c.batch, c.tq, width}, dtype, rng);     // [B, tq, H·d]
  if (c.zero_rows) {
    for (int64_t x = 0; x < c.d; ++x) {
      q.set({0, 0, x}, 0.0);
      k.set({0, 0, x}, 0.0);
    }
  }
  const Tensor g = c.per_head_g ? random_tensor({c.heads}, dtype, rng, 3.0) : Tensor::from_vector({2.5}, {1}, dtype);
  const Tensor* gp = c.qknorm ? &g : nullptr;

  // Outputs pre-filled with 777, so an element a kernel forgets to write shows. The state
  // holds what each backend keeps (Backend::attention_state): the CPU P (and rq, rk for qknorm),
  // the emulated GPU lse (and rq, rk), writing P only when asked.
  auto filled = [&](const Shape& shape) { return Tensor::full(shape, 777, dtype); };
  const Shape p_shape{c.batch, c.heads, c.tq, c.tk}, lse_shape{c.batch, c.heads, c.tq};
  const Shape rq_shape{c.batch, c.heads, c.tq}, rk_shape{c.batch, c.heads, c.tk};
  auto norms = [&](AttentionState st) {
    if (c.qknorm) {
      st.rq = filled(rq_shape);
      st.rk = filled(rk_shape);
    }
    return st;
  };
  Tensor cpu_out = filled(q.shape());
  AttentionState cpu_state = norms({filled(p_shape), Tensor(), Tensor(), Tensor()});
  backend(Device::cpu).attention_forward(s, q, k, v, gp, cpu_out, cpu_state);
  Tensor out = filled(q.shape());
  AttentionState state = norms({filled(p_shape), filled(lse_shape), Tensor(), Tensor()});
  emu_attention_forward(s, q, k, v, gp, out, state);
  // The training path: no P. out and lse must be the same bits.
  Tensor out_2 = filled(q.shape());
  AttentionState state_2 = norms({Tensor(), filled(lse_shape), Tensor(), Tensor()});
  emu_attention_forward(s, q, k, v, gp, out_2, state_2);
  const Tensor& probs = state.probs;
  const Tensor& cpu_probs = cpu_state.probs;
  const Tensor& lse = state.lse;
  const Tensor& lse_2 = state_2.lse;

  Failures f;
  f.check("out", out, cpu_out, tol);
  f.check("probs", probs, cpu_probs, tol);
  if (c.qknorm) {
    f.check("rq", state.rq, cpu_state.rq, tol);
    f.check("rk", state.rk, cpu_state.rk, tol);
  }
  if (out_2.to_vector() != out.to_vector() || lse_2.to_vector() != lse.to_vector()) {
    f.messages.push_back("out or lse differ between the runs with and without P");
  }

  auto gradients = [&] {
    return AttentionGrads{filled(q.shape()), filled(k.shape()), filled(v.shape()), c.qknorm ? filled(g.shape()) : Tensor()};
  };
  AttentionGrads want = gradients(), got = gradients();
  backend(Device::cpu).attention_backward(s, q, k, v, gp, cpu_out, cpu_state, dout, want);
  // The emulated backward reads only what its own forward kept (out, lse, rq, rk; no P).
  const AttentionState kept{Tensor(), lse, state.rq, state.rk};
  emu_attention_backward(s, q, k, v, gp, out, kept, dout, got);
  f.check("dq", got.dq, want.dq, tol);
  f.check("dk", got.dk, want.dk, tol);
  f.check("dv", got.dv, want.dv, tol);
  if (c.qknorm) f.check("dg", got.dg, want.dg, 10 * tol);  // dg: long sums
  return f.messages;
}

std::vector<Case> cases(bool long_rows) {
  std::vector<Case> list;
  auto both_modes = [&](Case c) {
    list.push_back(c);
    c.name += ", scaled_dot";
    c.qknorm = false;
    c.per_head_g = false;
    list.push_back(c);
  };
  both_modes({"cross-attention B2 H3 tq5 tk7 (kv_time 9) d13", 2, 3, 5, 7, 9, 13});
  {
    Case c{"causal, query offset 2", 2, 2, 4, 6, 6, 5};
    c.causal = true;
    c.query_offset = 2;
    both_modes(c);
    c.name = "causal, query offset -2 (rows with no visible key)";
    c.query_offset = -2;
    both_modes(c);
  }
  {
    Case c{"padding 3, 0, 6 (a fully masked entry), per-head g", 3, 2, 4, 6, 8, 7};
    c.key_lengths = {3, 0, 6};
    c.per_head_g = true;
    both_modes(c);
    c.name = "padding, causal offset 1, dropout 0.3, per-head g";
    c.causal = true;
    c.query_offset = 1;
    c.dropout = 0.3;
    both_modes(c);
  }
  {
    Case c{"dropout 0.4", 2, 2, 5, 9, 11, 6};
    c.dropout = 0.4;
    both_modes(c);
    c.name = "dropout 0.4, causal, per-head g";
    c.causal = true;
    c.per_head_g = true;
    both_modes(c);
  }
  both_modes({"tk 0 (no keys)", 2, 2, 3, 0, 4, 5});
  both_modes({"tq 0 (no queries)", 2, 2, 0, 4, 5, 5});
  both_modes({"B 0", 0, 2, 3, 4, 5, 5});
  both_modes({"H 1, d 1", 1, 1, 3, 3, 3, 1});
  {
    Case c{"zero-norm rows", 2, 2, 3, 4, 4, 6};
    c.zero_rows = true;
    list.push_back(c);
    c.name = "zero-norm rows, per-head g";
    c.per_head_g = true;
    list.push_back(c);
  }
  if (long_rows) {
    Case c{"300 keys, causal offset 290, dropout 0.2, d 150", 1, 2, 3, 300, 301, 150};
    c.causal = true;
    c.query_offset = 290;
    c.dropout = 0.2;
    both_modes(c);
    Case r{"260 queries, causal offset -1, dropout 0.1, d 40", 1, 1, 260, 5, 6, 40};
    r.causal = true;
    r.query_offset = -1;
    r.dropout = 0.1;
    both_modes(r);
  }
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  const bool long_rows = argc > 1 && std::string(argv[1]) == "--long";
  std::mt19937 rng(42);
  Report report;
  for (const Case& c : cases(long_rows)) {
    for (DType dtype : {DType::f64, DType::f32}) report.add(c.name, dtype, run_case(c, dtype, rng));
  }
  return report.finish();
}
