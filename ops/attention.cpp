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
  const Device dev = q.device();
  const DType dt = q.dtype();
  Backend& be = backend(dev);
  // The backend keeps either P (cpu) or the row statistics lse (cuda, flash-style: P is then
  // only made when the user asks for it); see Backend::attention_keeps_probs.
  const bool keeps_probs = be.attention_keeps_probs();
  const bool make_probs = keeps_probs || o.return_probs;
  Tensor out = Tensor::empty(q.shape(), dt, dev);  // [B, Tq, H·d]
  Tensor probs = Tensor::empty({s.batch, s.heads, make_probs ? s.tq : 0, make_probs ? s.tk : 0}, dt,
                               dev);                                                // P, before dropout
  Tensor lse = Tensor::empty({s.batch, s.heads, keeps_probs ? 0 : s.tq}, dt, dev);  // log Σ_j exp S_ij
  Tensor rq = Tensor::empty({s.batch, s.heads, s.qknorm ? s.tq : 0}, dt, dev);     // 1/‖q‖
  Tensor rk = Tensor::empty({s.batch, s.heads, s.qknorm ? s.tk : 0}, dt, dev);     // 1/‖k‖
  const Tensor* gp = s.qknorm ? &g : nullptr;
  be.attention_forward(s, q, k, v, gp, out, probs, lse, rq, rk);

  const bool g_learns = s.qknorm && g.requires_grad();
  if (should_record(q, k, v) || (g_learns && grad_enabled())) {
    std::vector<Tensor> inputs = {q, k, v};
    // P is saved only by a backend that reads it back (an empty tensor otherwise).
    const Tensor saved_probs = keeps_probs ? probs : Tensor::empty({0}, dt, dev);
    std::vector<Tensor> saved = {q, k, v, out, saved_probs, lse, rq, rk};
    if (s.qknorm) {
      inputs.push_back(g);
      saved.push_back(g);
    }
    record("attention", inputs, {out}, saved, [s](BackwardContext& ctx) {
      const Tensor& q = ctx.saved(0);
      const Tensor& k = ctx.saved(1);
      const Tensor& v = ctx.saved(2);
      const Tensor* g = s.qknorm ? &ctx.saved(8) : nullptr;
      Tensor dq = Tensor::empty(q.shape(), q.dtype(), q.device());
      Tensor dk = Tensor::empty(k.shape(), k.dtype(), k.device());
      Tensor dv = Tensor::empty(v.shape(), v.dtype(), v.device());
      Tensor dg;
      if (s.qknorm && ctx.needs_grad(3)) dg = Tensor::empty(g->shape(), g->dtype(), g->device());
      backend(q.device()).attention_backward(s, q, k, v, g, ctx.saved(3), ctx.saved(4), ctx.saved(5),
                                             ctx.saved(6), ctx.saved(7), ctx.grad_output(), dq, dk,
                                             dv, dg.defined() ? &dg : nullptr);
      ctx.accumulate(0, std::move(dq));
      ctx.accumulate(1, std::move(dk));
      ctx.accumulate(2, std::move(dv));
      if (dg.defined()) ctx.accumulate(3, std::move(dg));
    });
  }
  // The probabilities users see are a detached handle on P (no copy, no gradient).
  return {out, o.return_probs ? probs.detach() : Tensor()};
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
