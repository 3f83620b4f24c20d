// The fused attention op: checks, the tape record, and the KV-cache path. The kernels are
// Backend::attention_forward / attention_backward (backends/cpu/cpu_attention.cpp); the math
// and its derivation are in docs/qknorm-attention.md.
#include "ops/attention.h"

#include <cmath>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

AttentionSpec plan_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                             const AttentionOptions& o) {
  const char* op = "attention";
  check_same_dtype_device(op, q, k);
  check_same_dtype_device(op, q, v);
  QKGRAD_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3, op,
               ": q, k and v must be [B, T, H·d], got q ", q.shape(), ", k ", k.shape(), ", v ", v.shape());
  QKGRAD_CHECK(k.shape() == v.shape(), op, ": k ", k.shape(), " and v ", v.shape(), " must have the same shape");
  QKGRAD_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2), op, ": q ", q.shape(), " and k ",
               k.shape(), " must agree in batch size and width (H·d)");
  QKGRAD_CHECK(o.heads >= 1 && q.size(2) % o.heads == 0, op, ": the width ", q.size(2),
               " of q is not divisible into ", o.heads, " heads");
  QKGRAD_CHECK(o.dropout >= 0 && o.dropout < 1, op, ": dropout must be in [0, 1), got ", o.dropout);
  QKGRAD_CHECK(o.dropout == 0 || o.generator != nullptr, op,
               ": dropout > 0 needs a generator (AttentionOptions::generator) for its mask");
  QKGRAD_CHECK(o.eps > 0, op, ": eps must be > 0, got ", o.eps);
  QKGRAD_CHECK(o.kv_length >= -1 && o.kv_length <= k.size(1), op, ": kv_length ", o.kv_length,
               " must be -1 (all) or in [0, ", k.size(1), "] (the time steps of k)");
  const int64_t blas_limit = int64_t{1} << 31;
  QKGRAD_CHECK(q.size(1) < blas_limit && k.size(1) < blas_limit && q.size(2) < blas_limit, op,
               ": sizes beyond what BLAS can index (2^31): q ", q.shape(), ", k ", k.shape());
  AttentionSpec s;
  s.batch = q.size(0);
  s.heads = o.heads;
  s.tq = q.size(1);
  s.kv_time = k.size(1);
  s.tk = o.kv_length >= 0 ? o.kv_length : k.size(1);
  s.head_dim = q.size(2) / o.heads;
  s.qknorm = o.mode == AttentionMode::qknorm;
  s.scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(s.head_dim, 1)));
  s.eps = o.eps;
  s.causal = o.causal;
  s.query_offset = o.query_offset;
  if (s.qknorm) {
    check_same_dtype_device(op, q, g);
    QKGRAD_CHECK((g.numel() == 1 && g.rank() <= 1) || g.shape() == Shape{o.heads}, op,
                 ": g must be a scalar ([] or [1]) or one value per head ([", o.heads, "]), got ", g.shape());
    s.per_head_g = g.rank() == 1 && g.numel() == o.heads && o.heads > 1;
  }
  if (!o.key_lengths.empty()) {
    QKGRAD_CHECK(static_cast<int64_t>(o.key_lengths.size()) == s.batch, op, ": ", o.key_lengths.size(),
                 " key lengths given for a batch of ", s.batch);
    for (std::size_t b = 0; b < o.key_lengths.size(); ++b) {
      QKGRAD_CHECK(o.key_lengths[b] >= 0 && o.key_lengths[b] <= s.tk, op, ": key length ",
                   o.key_lengths[b], " of batch entry ", b, " is outside [0, ", s.tk, "]");
    }
    s.key_lengths = o.key_lengths;
  }
  s.dropout = o.dropout;
  return s;
}

}  // namespace

AttentionOutput attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const AttentionOptions& o) {
  AttentionSpec s = plan_attention(q, k, v, g, o);
  if (s.dropout > 0) {  // one stream word per element of P [B, H, Tq, Tk]
    Generator& gen = *o.generator;
    s.rs = RandomStream{gen.seed(), gen.stream(),
                        gen.reserve_blocks(static_cast<uint64_t>((s.batch * s.heads * s.tq * s.tk + 3) / 4))};
  }
  Backend& be = backend(q.device());
  // What the backward reads back, named; the backend chooses which (the CPU keeps P, the
  // CUDA kernels lse, from which they recompute P).
  AttentionState state = be.attention_state(s, q.dtype(), o.return_probs);
  Tensor out = Tensor::empty(q.shape(), q.dtype(), q.device());  // [B, Tq, H·d]
  be.attention_forward(s, q, k, v, s.qknorm ? &g : nullptr, out, state);

  const bool g_learns = s.qknorm && g.requires_grad();
  if (should_record(q, k, v) || (g_learns && grad_enabled())) {
    std::vector<Tensor> inputs = {q, k, v};
    if (s.qknorm) inputs.push_back(g);
    record_named("attention", inputs, {out},
                 {{"q", q}, {"k", k}, {"v", v}, {"g", s.qknorm ? g : Tensor()}, {"out", out},
                  {"probs", state.probs}, {"lse", state.lse}, {"rq", state.rq}, {"rk", state.rk}},
                 [s](BackwardContext& ctx) {
                   const Tensor& q = ctx.saved("q");
                   const Tensor& k = ctx.saved("k");
                   const Tensor& v = ctx.saved("v");
                   const Tensor* g = s.qknorm ? &ctx.saved("g") : nullptr;
                   const AttentionState kept{ctx.saved("probs"), ctx.saved("lse"), ctx.saved("rq"), ctx.saved("rk")};
                   AttentionGrads grads{Tensor::empty(q.shape(), q.dtype(), q.device()),
                                        Tensor::empty(k.shape(), k.dtype(), k.device()),
                                        Tensor::empty(v.shape(), v.dtype(), v.device()), Tensor()};
                   if (s.qknorm && ctx.needs_grad(3)) grads.dg = Tensor::empty(g->shape(), g->dtype(), g->device());
                   backend(q.device()).attention_backward(s, q, k, v, g, ctx.saved("out"), kept, ctx.grad_output(), grads);
                   ctx.accumulate(0, std::move(grads.dq));
                   ctx.accumulate(1, std::move(grads.dk));
                   ctx.accumulate(2, std::move(grads.dv));
                   if (grads.dg.defined()) ctx.accumulate(3, std::move(grads.dg));
                 });
  }
  // The probabilities users see are a detached handle on P (no copy, no gradient).
  return {out, o.return_probs ? state.probs.detach() : Tensor()};
}

double qknorm_initial_g(double length) {
  QKGRAD_CHECK(length > 1, "qknorm_initial_g: the length L must be > 1 (g₀ = log2(L² − L)), got ", length);
  return std::log2(length * length - length);
}

AttentionOutput attention_step(const Tensor& q, const Tensor& keys, const Tensor& values, int64_t length,
                               const Tensor& g, AttentionOptions o) {
  QKGRAD_CHECK(length >= 0 && length <= keys.size(1), "attention_step: length ", length, " is outside the ",
               keys.size(1), " cached rows");
  QKGRAD_CHECK(q.rank() == 3 && q.size(1) <= length, "attention_step: q ", q.shape(), " has more steps than the ",
               length, " in the cache (append their keys first)");
  o.kv_length = length;
  if (o.causal) o.query_offset = length - q.size(1);
  return attention(q, keys, values, g, o);
}

}  // namespace qkgrad
