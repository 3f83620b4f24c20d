// Fused multi-head attention, QKNorm and scaled dot-product, forward and backward.
//
// The equation numbers (1)–(15) refer to docs/qknorm-attention.md. Work is split over
// (batch, head) pairs with OpenMP; inside a pair, the three products are single-threaded BLAS
// calls that read the head's columns of the [B, T, H·d] tensors in place (leading dimension
// H·d): no permute copies. Each thread has its own [tq, tk] workspace from the caching
// allocator. Every (b, h) writes only its own columns of out, dq, dk, dv, so there are no races,
// and dg is summed from per-(b, h) partials in a fixed order: results are deterministic.
#include <algorithm>
#include <cmath>
#include <limits>
#include <omp.h>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_blas.h"
#include "backends/cpu/cpu_common.h"
#include "core/philox.h"

namespace qkgrad {

namespace {

// The layout of one (b, h) problem inside the big tensors.
struct Head {
  int64_t q_offset, kv_offset, out_offset;  // element offsets of row 0, column h·d
  int64_t ld;                               // H·d: the row stride of every tensor
  int64_t stat_offset_q, stat_offset_k;     // offsets into [B, H, tq] and [B, H, tk] statistics
  int64_t key_length;                       // keys >= this are padding
};

Head head_of(const AttentionSpec& s, int64_t b, int64_t h) {
  const int64_t ld = s.heads * s.head_dim;
  Head x;
  x.ld = ld;
  x.q_offset = b * s.tq * ld + h * s.head_dim;
  x.kv_offset = b * s.kv_time * ld + h * s.head_dim;
  x.out_offset = x.q_offset;
  x.stat_offset_q = (b * s.heads + h) * s.tq;
  x.stat_offset_k = (b * s.heads + h) * s.tk;
  x.key_length = s.key_lengths.empty() ? s.tk : std::min<int64_t>(s.tk, s.key_lengths[static_cast<std::size_t>(b)]);
  return x;
}

// Is key j visible to query i? (the mask M: 0 when visible, −∞ when not)
bool visible(const AttentionSpec& s, const Head& hd, int64_t i, int64_t j) {
  return j < hd.key_length && (!s.causal || j <= i + s.query_offset);
}

// The dropout factor z_ij / (1 − p) of (5), from the Philox word of element ((b·H + h)·tq + i)·tk + j.
struct DropoutMask {
  const AttentionSpec& s;
  uint32_t threshold;
  double scale;
  explicit DropoutMask(const AttentionSpec& spec)
      : s(spec), threshold(static_cast<uint32_t>(std::min(std::ldexp(spec.dropout, 32), 4294967295.0))),
        scale(1.0 / (1.0 - spec.dropout)) {}
  double factor(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (s.dropout == 0) return 1.0;
    const uint64_t index = static_cast<uint64_t>(((b * s.heads + h) * s.tq + i) * s.tk + j);
    const philox::Block blk = philox::random_block(s.rs.seed, s.rs.stream, s.rs.first_block + index / 4);
    return blk.v[index % 4] >= threshold ? scale : 0.0;
  }
};

// rq_i = 1 / max(‖x_i‖, eps) for rows of a head (1).
template <typename T>
void inverse_norms(const T* x, int64_t rows, int64_t d, int64_t ld, double eps, T* r) {
  for (int64_t i = 0; i < rows; ++i) {
    T s = 0;
    for (int64_t c = 0; c < d; ++c) s += x[i * ld + c] * x[i * ld + c];
    r[i] = T(1) / std::max(std::sqrt(s), static_cast<T>(eps));
  }
}

// S = logits (2)–(3) with the mask applied, from the raw products R = q kᵀ (in place).
template <typename T>
void logits_in_place(const AttentionSpec& s, const Head& hd, T g, const T* rq, const T* rk, T* S) {
  for (int64_t i = 0; i < s.tq; ++i) {
    for (int64_t j = 0; j < s.tk; ++j) {
      T& x = S[i * s.tk + j];
      if (!visible(s, hd, i, j)) {
        x = -std::numeric_limits<T>::infinity();
      } else {
        x = s.qknorm ? g * rq[i] * rk[j] * x : static_cast<T>(s.scale) * x;
      }
    }
  }
}

template <typename T>
T head_g(const AttentionSpec& s, const Tensor* g, int64_t h) {
  if (!s.qknorm) return T(1);
  const T* gs = g->data<T>();
  return s.per_head_g ? gs[h] : gs[0];
}

}  // namespace

void CpuBackend::attention_forward(const AttentionSpec& s, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor* g, Tensor& out, Tensor& lse,
                                   Tensor& rq, Tensor& rk, Tensor* probs) {
  cpu::dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t pairs = s.batch * s.heads, d = s.head_dim, per_thread = s.tq * s.tk;
    const int threads = omp_get_max_threads();
    Tensor workspace = Tensor::empty({threads, std::max<int64_t>(per_thread, 1)}, q.dtype());
    const DropoutMask dropout(s);
    const T* Q = q.data<T>();
    const T* K = k.data<T>();
    const T* V = v.data<T>();
    T* O = out.data<T>();
    T* L = lse.data<T>();
    T* RQ = rq.data<T>();
    T* RK = rk.data<T>();
    T* PR = probs ? probs->data<T>() : nullptr;
    T* W = workspace.data<T>();
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * per_thread * d >= kParallelGrain)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / s.heads, h = pair % s.heads;
      const Head hd = head_of(s, b, h);
      T* S = W + static_cast<int64_t>(omp_get_thread_num()) * std::max<int64_t>(per_thread, 1);
      T* rq_h = RQ + hd.stat_offset_q;
      T* rk_h = RK + hd.stat_offset_k;
      T* lse_h = L + hd.stat_offset_q;
      T* out_h = O + hd.out_offset;
      if (s.qknorm) {  // (1)
        inverse_norms(Q + hd.q_offset, s.tq, d, hd.ld, s.eps, rq_h);
        inverse_norms(K + hd.kv_offset, s.tk, d, hd.ld, s.eps, rk_h);
      }
      if (s.tk == 0) {  // no keys at all: every row is fully masked
        for (int64_t i = 0; i < s.tq; ++i) {
          lse_h[i] = -std::numeric_limits<T>::infinity();
          for (int64_t c = 0; c < d; ++c) out_h[i * hd.ld + c] = T(0);
        }
        continue;
      }
      // R = q kᵀ [tq, tk], then S = logits with the mask (2)–(3).
      cpu::gemm(false, true, s.tq, s.tk, d, 1.0, Q + hd.q_offset, hd.ld, K + hd.kv_offset, hd.ld, 0.0, S, s.tk);
      logits_in_place(s, hd, head_g<T>(s, g, h), rq_h, rk_h, S);
      // P = softmax rows (4), kept in S; then P' = dropout(P) (5).
      for (int64_t i = 0; i < s.tq; ++i) {
        T* row = S + i * s.tk;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < s.tk; ++j) m = std::max(m, row[j]);
        if (m == -std::numeric_limits<T>::infinity()) {  // fully masked: P = 0, out = 0
          lse_h[i] = m;
          std::fill(row, row + s.tk, T(0));
        } else {
          T sum = 0;
          for (int64_t j = 0; j < s.tk; ++j) {
            row[j] = std::exp(row[j] - m);
            sum += row[j];
          }
          lse_h[i] = m + std::log(sum);
          const T inv = T(1) / sum;
          for (int64_t j = 0; j < s.tk; ++j) row[j] *= inv;
        }
        if (PR) std::copy(row, row + s.tk, PR + (static_cast<int64_t>(pair) * s.tq + i) * s.tk);
        if (s.dropout > 0) {
          for (int64_t j = 0; j < s.tk; ++j) row[j] *= static_cast<T>(dropout.factor(b, h, i, j));
        }
      }
      // out = P' v (6), written straight into the head's columns.
      cpu::gemm(false, false, s.tq, d, s.tk, 1.0, S, s.tk, V + hd.kv_offset, hd.ld, 0.0, out_h, hd.ld);
    }
  });
}

void CpuBackend::attention_backward(const AttentionSpec& s, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor* g, const Tensor& out,
                                    const Tensor& lse, const Tensor& rq, const Tensor& rk,
                                    const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                                    Tensor* dg) {
  cpu::dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t pairs = s.batch * s.heads, d = s.head_dim;
    // Per thread: P [tq, tk], dS [tq, tk], dq̂ [tq, d], dk̂ [tk, d].
    const int64_t per_thread = std::max<int64_t>(2 * s.tq * s.tk + (s.tq + s.tk) * d, 1);
    const int threads = omp_get_max_threads();
    Tensor workspace = Tensor::empty({threads, per_thread}, q.dtype());
    std::vector<double> dg_partial(static_cast<std::size_t>(pairs), 0.0);
    const DropoutMask dropout(s);
    const T* Q = q.data<T>();
    const T* K = k.data<T>();
    const T* V = v.data<T>();
    const T* O = out.data<T>();
    const T* L = lse.data<T>();
    const T* RQ = rq.data<T>();
    const T* RK = rk.data<T>();
    const T* dO = dout.data<T>();
    T* dQ = dq.data<T>();
    T* dK = dk.data<T>();
    T* dV = dv.data<T>();
    T* W = workspace.data<T>();
    // Cache rows beyond tk are not read by the forward: their gradient is 0.
    std::fill(dK, dK + dk.numel(), T(0));
    std::fill(dV, dV + dv.numel(), T(0));
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * s.tq * s.tk * d >= kParallelGrain)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / s.heads, h = pair % s.heads;
      const Head hd = head_of(s, b, h);
      T* P = W + static_cast<int64_t>(omp_get_thread_num()) * per_thread;
      T* dS = P + s.tq * s.tk;
      T* dqh = dS + s.tq * s.tk;
      T* dkh = dqh + s.tq * d;
      const T* rq_h = RQ + hd.stat_offset_q;
      const T* rk_h = RK + hd.stat_offset_k;
      const T* lse_h = L + hd.stat_offset_q;
      const T* q_h = Q + hd.q_offset;
      const T* k_h = K + hd.kv_offset;
      const T* v_h = V + hd.kv_offset;
      const T* do_h = dO + hd.out_offset;
      const T* o_h = O + hd.out_offset;
      T* dq_h = dQ + hd.q_offset;
      const T gh = head_g<T>(s, g, h);
      if (s.tk == 0) {
        for (int64_t i = 0; i < s.tq; ++i) std::fill(dq_h + i * hd.ld, dq_h + i * hd.ld + d, T(0));
        continue;
      }
      // Recompute P from the saved log-sum-exp (4): P = exp(S − lse), 0 where masked.
      cpu::gemm(false, true, s.tq, s.tk, d, 1.0, q_h, hd.ld, k_h, hd.ld, 0.0, P, s.tk);
      logits_in_place(s, hd, gh, rq_h, rk_h, P);
      for (int64_t i = 0; i < s.tq; ++i) {
        for (int64_t j = 0; j < s.tk; ++j) {
          T& x = P[i * s.tk + j];
          x = lse_h[i] == -std::numeric_limits<T>::infinity() ? T(0) : std::exp(x - lse_h[i]);
        }
      }
      // dv = P'ᵀ dO (7), with P' = z ⊙ P built in the dS buffer when there is dropout.
      if (s.dropout > 0) {
        for (int64_t i = 0; i < s.tq; ++i)
          for (int64_t j = 0; j < s.tk; ++j)
            dS[i * s.tk + j] = P[i * s.tk + j] * static_cast<T>(dropout.factor(b, h, i, j));
      }
      cpu::gemm(true, false, s.tk, d, s.tq, 1.0, s.dropout > 0 ? dS : P, s.tk, do_h, hd.ld, 0.0,
                dV + hd.kv_offset, hd.ld);
      // dP' = dO vᵀ (8), then dP = z ⊙ dP' (9), in the dS buffer.
      cpu::gemm(false, true, s.tq, s.tk, d, 1.0, do_h, hd.ld, v_h, hd.ld, 0.0, dS, s.tk);
      if (s.dropout > 0) {
        for (int64_t i = 0; i < s.tq; ++i)
          for (int64_t j = 0; j < s.tk; ++j) dS[i * s.tk + j] *= static_cast<T>(dropout.factor(b, h, i, j));
      }
      // dS = P ⊙ (dP − D), D_i = dO_i · O_i (10)–(11).
      for (int64_t i = 0; i < s.tq; ++i) {
        T D = 0;
        for (int64_t c = 0; c < d; ++c) D += do_h[i * hd.ld + c] * o_h[i * hd.ld + c];
        for (int64_t j = 0; j < s.tk; ++j) dS[i * s.tk + j] = P[i * s.tk + j] * (dS[i * s.tk + j] - D);
      }
      if (!s.qknorm) {  // (15): dq = scale dS k, dk = scale dSᵀ q, straight into the outputs
        cpu::gemm(false, false, s.tq, d, s.tk, s.scale, dS, s.tk, k_h, hd.ld, 0.0, dq_h, hd.ld);
        cpu::gemm(true, false, s.tk, d, s.tq, s.scale, dS, s.tk, q_h, hd.ld, 0.0, dK + hd.kv_offset, hd.ld);
        continue;
      }
      // dg partial (12): Σ dS_ij C_ij, with C_ij = (S_ij) / g recomputed as rq_i rk_j (q_i·k_j):
      // P holds exp(S − lse), so take C from a fresh product (reuse P's buffer).
      cpu::gemm(false, true, s.tq, s.tk, d, 1.0, q_h, hd.ld, k_h, hd.ld, 0.0, P, s.tk);
      double dg_sum = 0;
      for (int64_t i = 0; i < s.tq; ++i)
        for (int64_t j = 0; j < s.tk; ++j) {
          const T c = rq_h[i] * rk_h[j] * P[i * s.tk + j];
          dg_sum += static_cast<double>(dS[i * s.tk + j] * c);
        }
      dg_partial[static_cast<std::size_t>(pair)] = dg_sum;
      // dq̂_i = g Σ_j dS_ij rk_j k_j (13): scale dS's columns by g·rk into P, one GEMM.
      for (int64_t i = 0; i < s.tq; ++i)
        for (int64_t j = 0; j < s.tk; ++j) P[i * s.tk + j] = gh * dS[i * s.tk + j] * rk_h[j];
      cpu::gemm(false, false, s.tq, d, s.tk, 1.0, P, s.tk, k_h, hd.ld, 0.0, dqh, d);
      // dk̂_j = g Σ_i dS_ij rq_i q_i (13): scale dS's rows by g·rq, one GEMM.
      for (int64_t i = 0; i < s.tq; ++i)
        for (int64_t j = 0; j < s.tk; ++j) P[i * s.tk + j] = gh * dS[i * s.tk + j] * rq_h[i];
      cpu::gemm(true, false, s.tk, d, s.tq, 1.0, P, s.tk, q_h, hd.ld, 0.0, dkh, d);
      // Back through the normalisation (14): keep the part of dx̂ orthogonal to x̂.
      auto through_norm = [&](const T* x, const T* r, const T* dxh, T* dx, int64_t rows) {
        for (int64_t i = 0; i < rows; ++i) {
          T sq = 0, dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            sq += x[i * hd.ld + c] * x[i * hd.ld + c];
            dot += x[i * hd.ld + c] * r[i] * dxh[i * d + c];  // x̂ · dx̂
          }
          const bool on_sphere = std::sqrt(sq) > static_cast<T>(s.eps);
          for (int64_t c = 0; c < d; ++c) {
            const T xhat = x[i * hd.ld + c] * r[i];
            dx[i * hd.ld + c] = r[i] * (dxh[i * d + c] - (on_sphere ? xhat * dot : T(0)));
          }
        }
      };
      through_norm(q_h, rq_h, dqh, dq_h, s.tq);
      through_norm(k_h, rk_h, dkh, dK + hd.kv_offset, s.tk);
    }
    if (dg && s.qknorm) {  // (12), summed in (b, h) order
      T* out_g = dg->data<T>();
      if (s.per_head_g) {
        for (int64_t h = 0; h < s.heads; ++h) {
          double total = 0;
          for (int64_t b = 0; b < s.batch; ++b) total += dg_partial[static_cast<std::size_t>(b * s.heads + h)];
          out_g[h] = static_cast<T>(total);
        }
      } else {
        double total = 0;
        for (double p : dg_partial) total += p;
        out_g[0] = static_cast<T>(total);
      }
    }
  });
}

}  // namespace qkgrad
