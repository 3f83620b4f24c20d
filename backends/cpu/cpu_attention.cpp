// Fused multi-head attention, QKNorm and scaled dot-product, forward and backward.
//
// The equation numbers (1)–(15) refer to docs/qknorm-attention.md. Work is split over
// (batch, head) pairs with OpenMP; inside a pair, the products are single-threaded BLAS calls
// that read the head's columns of the [B, T, H·d] tensors in place (leading dimension H·d): no
// permute copies. Each product runs over blocks of query rows and only the keys a block can
// see (for_each_row_block), so a causal mask skips the masked triangle down to a block's width.
// The forward keeps P (before dropout) for the backward, which then needs no exponentials and
// four GEMMs (the CUDA kernels keep lse instead and recompute P: on the CPU, where memory is
// plentiful, recomputing would cost two more GEMMs per head). Each thread has its own workspace
// from the caching allocator. Every (b, h) writes only its own columns of out, dq, dk, dv, so
// there are no races, and dg is summed from per-(b, h) partials in a fixed order: results are
// deterministic.
//
// Symbols of docs/qknorm-attention.md and their names here (one (b, h) head; i a query row, j a
// key row; each buffer has one role):
//
//   q, k, v, O      q_h, k_h, v_h, o_h     rows of the head's columns of q, k, v, out [T, d]
//   rq, rk          rq_h, rk_h             1/max(‖q_i‖, ε), 1/max(‖k_j‖, ε) (1), saved [tq], [tk]
//   g               gh                     the gain: one, or the head's
//   R = q kᵀ, S, P  P                      the raw products, then in place the logits (2)–(3) and
//                                          P = softmax(S) (4): saved [tq, tk]
//   z/(1 − p)       Z                      the dropout factors of (5), regenerated in the backward
//   P'              P_used                 P, or z/(1 − p) ⊙ P under dropout (5)
//   Ō, P̄', P̄, S̄     do_h, dS               the output's gradient; dS holds P̄' (8), P̄ (9), then S̄ (10)–(11)
//                                          (and, under dropout, P' for (7) before them)
//   D               D                      Ō_i · O_i (10)
//   S̄ ⊙ rk, S̄ ⊙ rq  scaled                 S̄ with its columns (or rows) scaled, the GEMMs' left operand
//   U, W            U, W                   q̂̄/g and k̂̄/g (12): Σ_j S̄_ij k̂_j and Σ_i S̄_ij q̂_i
//   ḡ               dg_partial             Σ_i q̂_i · U_i (13), per (b, h), summed in a fixed order
//   q̄, k̄, v̄        dq_h, dk_h, dV         the gradients (14) (QKNorm) or (15) (scaled dot); v̄ (7)
#include <algorithm>
#include <cmath>
#include <limits>
#include <omp.h>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_blas.h"
#include "backends/cpu/cpu_common.h"
#include "core/fast_math.h"
#include "backends/cpu/cpu_philox.h"
#include "core/row_functions.h"
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
  x.key_length = s.key_lengths.empty() ? s.tk : std::min<int64_t>(s.tk, s.key_lengths[b]);
  return x;
}

// The keys visible to query i (the mask M: 0 when visible, −∞ when not) are a prefix
// j < visible_keys(i): padding hides j >= key_length, the causal mask j > i + query_offset.
int64_t visible_keys(const AttentionSpec& s, const Head& hd, int64_t i) {
  const int64_t end = s.causal ? std::min(hd.key_length, i + s.query_offset + 1) : hd.key_length;
  return std::clamp<int64_t>(end, 0, s.tk);
}

// The query rows in blocks, each with the keys any of its rows can see (a prefix: visible_keys
// grows with i). Every product below runs on a block's [rows, keys] only, so a causal mask skips
// about half the work of a square head (rows of kCausalRows: T = 64 does 62.5%), and padding keys
// are never multiplied. Without a causal mask every row sees the same keys: one block.
constexpr int64_t kCausalRows = 32;
struct RowBlock {
  int64_t first, rows, keys;
};
template <typename F>
void for_each_row_block(const AttentionSpec& s, const Head& hd, F&& f) {
  const int64_t step = s.causal ? kCausalRows : std::max<int64_t>(s.tq, 1);
  for (int64_t first = 0; first < s.tq; first += step) {
    const int64_t rows = std::min(step, s.tq - first);
    f(RowBlock{first, rows, visible_keys(s, hd, first + rows - 1)});
  }
}

// C = alpha·op(A) op(B) + beta·C with BLAS's meaning kept for empty blocks (a block with no
// visible key has k = 0, so C = beta·C) without asking every provider to handle them.
template <typename T>
void block_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, double beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? T(0) : static_cast<T>(beta) * c[i * ldc + j];
    return;
  }
  cpu::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The dropout factors z_ij / (1 − p) of (5) for one row i of one (b, h): element j reads the
// Philox word of stream element ((b·H + h)·tq + i)·tk + j. The row's words are generated in one
// vectorised batch into a per-thread scratch buffer.
struct DropoutMask {
  const AttentionSpec& s;
  uint32_t threshold;
  double scale;
  explicit DropoutMask(const AttentionSpec& spec)
      : s(spec), threshold(dropout_threshold(spec.dropout)),
        scale(1.0 / (1.0 - spec.dropout)) {}
  template <typename T>
  void row(int64_t b, int64_t h, int64_t i, T* factors) const {
    thread_local std::vector<uint32_t> scratch;
    scratch.resize(4 * (s.tk / 4 + 2));
    const uint64_t index = static_cast<uint64_t>(((b * s.heads + h) * s.tq + i) * s.tk);
    const uint32_t* words = cpu::philox_element_words(s.rs.seed, s.rs.stream, s.rs.first_block, index, s.tk, scratch.data());
    const T kept = static_cast<T>(scale);
#pragma omp simd  // a vector select (-fno-trapping-math), not a branch a random word mispredicts
    for (int64_t j = 0; j < s.tk; ++j) factors[j] = words[j] >= threshold ? kept : T(0);
  }
};

// rq_i = 1 / max(‖x_i‖, eps) for rows of a head (1).
template <typename T>
void inverse_norms(const T* x, int64_t rows, int64_t d, int64_t ld, double eps, T* r) {
  for (int64_t i = 0; i < rows; ++i) {
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < d; ++c) s += x[i * ld + c] * x[i * ld + c];
    r[i] = T(1) / std::max(std::sqrt(s), static_cast<T>(eps));
  }
}

// P = softmax(S) (2)–(4), in place, from the raw products R = q kᵀ: row i's logits are
// S_ij = g rq_i rk_j R_ij (QKNorm) or scale · R_ij on its visible keys j < n, and −∞ beyond, so
// P_ij = 0 there exactly. A row with no visible key is all zeros (its output row is 0).
template <typename T>
void softmax_of_logits(const AttentionSpec& s, const Head& hd, T g, const T* rq, const T* rk, T* S) {
  for (int64_t i = 0; i < s.tq; ++i) {
    T* row = S + i * s.tk;
    const int64_t n = visible_keys(s, hd, i);
    std::fill(row + n, row + s.tk, T(0));
    if (n == 0) continue;
    if (s.qknorm()) {
      const T coef = g * rq[i];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] *= coef * rk[j];
    } else {
      const T scale = static_cast<T>(s.scale);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] *= scale;
    }
    T m = row[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 1; j < n; ++j) m = std::max(m, row[j]);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      row[j] = exp_fast(row[j] - m);
      sum += row[j];
    }
    const T inv = T(1) / sum;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  }
}

template <typename T>
T head_g(const AttentionSpec& s, const Tensor* g, int64_t h) {
  if (!s.qknorm()) return T(1);
  const T* gs = g->data<T>();
  return s.per_head_g ? gs[h] : gs[0];
}

}  // namespace

// The CPU keeps P (so the backward needs no exponentials) and, for qknorm, rq and rk; no lse.
AttentionState CpuBackend::attention_state(const AttentionSpec& s, DType dtype, bool /*want_probs: always made*/) {
  AttentionState state;
  state.probs = Tensor::empty({s.batch, s.heads, s.tq, s.tk}, dtype);  // [B, H, tq, tk]
  if (s.qknorm()) {
    state.rq = Tensor::empty({s.batch, s.heads, s.tq}, dtype);  // [B, H, tq]
    state.rk = Tensor::empty({s.batch, s.heads, s.tk}, dtype);  // [B, H, tk]
  }
  return state;
}

void CpuBackend::attention_forward(const AttentionSpec& s, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor* g, Tensor& out, AttentionState& state) {
  cpu::dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t pairs = s.batch * s.heads, d = s.head_dim, tile = s.tq * s.tk;
    // Per thread: P' = dropout(P) [tq, tk], only needed with dropout.
    const int64_t per_thread = s.dropout > 0 ? std::max<int64_t>(tile, 1) : 1;
    Tensor workspace = Tensor::empty({omp_get_max_threads(), per_thread}, q.dtype());
    const DropoutMask dropout(s);
    const T* Q = q.data<T>();
    const T* K = k.data<T>();
    const T* V = v.data<T>();
    T* O = out.data<T>();
    T* PR = state.probs.data<T>();
    T* RQ = s.qknorm() ? state.rq.data<T>() : nullptr;
    T* RK = s.qknorm() ? state.rk.data<T>() : nullptr;
    T* scratch = workspace.data<T>();
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * tile * d >= kParallelGrain)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / s.heads, h = pair % s.heads;
      const Head hd = head_of(s, b, h);
      T* P = PR + pair * tile;  // this head's [tq, tk] block of probs
      T* rq_h = s.qknorm() ? RQ + hd.stat_offset_q : nullptr;
      T* rk_h = s.qknorm() ? RK + hd.stat_offset_k : nullptr;
      T* out_h = O + hd.out_offset;
      if (s.qknorm()) {  // (1)
        inverse_norms(Q + hd.q_offset, s.tq, d, hd.ld, s.eps, rq_h);
        inverse_norms(K + hd.kv_offset, s.tk, d, hd.ld, s.eps, rk_h);
      }
      if (s.tk == 0) {  // no keys at all: every row is fully masked, the output is 0
        for (int64_t i = 0; i < s.tq; ++i) std::fill(out_h + i * hd.ld, out_h + i * hd.ld + d, T(0));
        continue;
      }
      // R = q kᵀ [tq, tk] in P's memory (each block's visible keys), then the masked logits and
      // their softmax (2)–(4), which zeroes every row beyond its visible keys.
      for_each_row_block(s, hd, [&](const RowBlock& r) {
        block_gemm(false, true, r.rows, r.keys, d, 1.0, Q + hd.q_offset + r.first * hd.ld, hd.ld,
                   K + hd.kv_offset, hd.ld, 0.0, P + r.first * s.tk, s.tk);
      });
      softmax_of_logits(s, hd, head_g<T>(s, g, h), rq_h, rk_h, P);
      // out = P' v (5)–(6), written straight into the head's columns.
      const T* P_used = P;
      if (s.dropout > 0) {
        T* Pd = scratch + static_cast<int64_t>(omp_get_thread_num()) * per_thread;
        for (int64_t i = 0; i < s.tq; ++i) {
          dropout.row(b, h, i, Pd + i * s.tk);
          for (int64_t j = 0; j < s.tk; ++j) Pd[i * s.tk + j] *= P[i * s.tk + j];
        }
        P_used = Pd;
      }
      for_each_row_block(s, hd, [&](const RowBlock& r) {
        block_gemm(false, false, r.rows, d, r.keys, 1.0, P_used + r.first * s.tk, s.tk, V + hd.kv_offset, hd.ld,
                   0.0, out_h + r.first * hd.ld, hd.ld);
      });
    }
  });
}

void CpuBackend::attention_backward(const AttentionSpec& s, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor* g, const Tensor& out,
                                    const AttentionState& state, const Tensor& dout, AttentionGrads& grads) {
  Tensor* dg = grads.dg.defined() ? &grads.dg : nullptr;
  cpu::dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t pairs = s.batch * s.heads, d = s.head_dim, tile = s.tq * s.tk;
    // Per thread: dS [tq, tk]; with dropout Z [tq, tk]; for QKNorm scaled [tq, tk], U [tq, d], W [tk, d].
    const int64_t z_size = s.dropout > 0 ? tile : 0, norm_size = s.qknorm() ? tile + (s.tq + s.tk) * d : 0;
    const int64_t per_thread = std::max<int64_t>(tile + z_size + norm_size, 1);
    Tensor workspace = Tensor::empty({omp_get_max_threads(), per_thread}, q.dtype());
    std::vector<double> dg_partial(pairs, 0.0);
    const DropoutMask dropout(s);
    const T* Q = q.data<T>();
    const T* K = k.data<T>();
    const T* Vs = v.data<T>();
    const T* O = out.data<T>();
    const T* PR = state.probs.data<T>();
    const T* RQ = s.qknorm() ? state.rq.data<T>() : nullptr;
    const T* RK = s.qknorm() ? state.rk.data<T>() : nullptr;
    const T* dO = dout.data<T>();
    T* dQ = grads.dq.data<T>();
    T* dK = grads.dk.data<T>();
    T* dV = grads.dv.data<T>();
    T* thread_space = workspace.data<T>();
    // Cache rows beyond tk are not read by the forward: their gradient is 0.
    std::fill(dK, dK + grads.dk.numel(), T(0));
    std::fill(dV, dV + grads.dv.numel(), T(0));
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * tile * d >= kParallelGrain)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / s.heads, h = pair % s.heads;
      const Head hd = head_of(s, b, h);
      T* dS = thread_space + static_cast<int64_t>(omp_get_thread_num()) * per_thread;
      T* Z = s.dropout > 0 ? dS + tile : nullptr;              // z_size elements
      T* scaled = s.qknorm() ? dS + tile + z_size : nullptr;   // then QKNorm's three
      T* U = s.qknorm() ? scaled + tile : nullptr;
      T* W = s.qknorm() ? U + s.tq * d : nullptr;
      const T* P = PR + pair * tile;
      const T* rq_h = s.qknorm() ? RQ + hd.stat_offset_q : nullptr;
      const T* rk_h = s.qknorm() ? RK + hd.stat_offset_k : nullptr;
      const T* q_h = Q + hd.q_offset;
      const T* k_h = K + hd.kv_offset;
      const T* v_h = Vs + hd.kv_offset;
      const T* do_h = dO + hd.out_offset;
      const T* o_h = O + hd.out_offset;
      T* dq_h = dQ + hd.q_offset;
      T* dk_h = dK + hd.kv_offset;
      if (s.tk == 0) {
        for (int64_t i = 0; i < s.tq; ++i) std::fill(dq_h + i * hd.ld, dq_h + i * hd.ld + d, T(0));
        continue;
      }
      const T gh = head_g<T>(s, g, h);
      if (s.qknorm()) std::fill(W, W + s.tk * d, T(0));  // summed over the row blocks
      for_each_row_block(s, hd, [&](const RowBlock& r) {
        const int64_t n = r.keys, first = r.first;
        const T* P_r = P + first * s.tk;  // this block's rows of P, Z, dS and scaled: [rows, tk], n used
        T* Z_r = Z ? Z + first * s.tk : nullptr;
        T* dS_r = dS + first * s.tk;
        T* scaled_r = scaled ? scaled + first * s.tk : nullptr;
        const T* q_r = q_h + first * hd.ld;
        const T* do_r = do_h + first * hd.ld;
        // dv += P'ᵀ dO (7); under dropout P' = Z ⊙ P is built in dS, which (8) then overwrites.
        const T* P_used = P_r;
        if (s.dropout > 0) {
          for (int64_t i = 0; i < r.rows; ++i) {
            dropout.row(b, h, first + i, Z_r + i * s.tk);
            for (int64_t j = 0; j < n; ++j) dS_r[i * s.tk + j] = Z_r[i * s.tk + j] * P_r[i * s.tk + j];
          }
          P_used = dS_r;
        }
        block_gemm(true, false, n, d, r.rows, 1.0, P_used, s.tk, do_r, hd.ld, 1.0, dV + hd.kv_offset, hd.ld);
        // dP' = dO vᵀ (8), then dP = Z ⊙ dP' (9).
        block_gemm(false, true, r.rows, n, d, 1.0, do_r, hd.ld, v_h, hd.ld, 0.0, dS_r, s.tk);
        if (s.dropout > 0) {
          for (int64_t i = 0; i < r.rows; ++i)
            for (int64_t j = 0; j < n; ++j) dS_r[i * s.tk + j] *= Z_r[i * s.tk + j];
        }
        // dS = P ⊙ (dP − D), with D_i = dO_i · O_i (10)–(11).
        for (int64_t i = 0; i < r.rows; ++i) {
          const int64_t row_i = first + i;
          T D = 0;
#pragma omp simd reduction(+ : D)
          for (int64_t c = 0; c < d; ++c) D += do_h[row_i * hd.ld + c] * o_h[row_i * hd.ld + c];
          T* row = dS_r + i * s.tk;
          const T* p_row = P_r + i * s.tk;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) row[j] = rows::attention_ds(p_row[j], row[j], D);
        }
        if (!s.qknorm()) {  // (15): dq = scale dS k, dk += scale dSᵀ q, straight into the outputs
          block_gemm(false, false, r.rows, d, n, s.scale, dS_r, s.tk, k_h, hd.ld, 0.0, dq_h + first * hd.ld, hd.ld);
          block_gemm(true, false, n, d, r.rows, s.scale, dS_r, s.tk, q_r, hd.ld, 1.0, dk_h, hd.ld);
          return;
        }
        // U_i = Σ_j dS_ij k̂_j (12, without g): dS's columns scaled by rk, one GEMM with k.
        for (int64_t i = 0; i < r.rows; ++i)
          for (int64_t j = 0; j < n; ++j) scaled_r[i * s.tk + j] = dS_r[i * s.tk + j] * rk_h[j];
        block_gemm(false, false, r.rows, d, n, 1.0, scaled_r, s.tk, k_h, hd.ld, 0.0, U + first * d, d);
        // W_j += Σ_i dS_ij q̂_i (12, without g): dS's rows scaled by rq, one GEMM with q.
        for (int64_t i = 0; i < r.rows; ++i)
          for (int64_t j = 0; j < n; ++j) scaled_r[i * s.tk + j] = dS_r[i * s.tk + j] * rq_h[first + i];
        block_gemm(true, false, n, d, r.rows, 1.0, scaled_r, s.tk, q_r, hd.ld, 1.0, W, d);
      });
      if (!s.qknorm()) continue;
      // dg (13): Σ_ij dS_ij q̂_i·k̂_j = Σ_i q̂_i · U_i, no [tq, tk] pass needed.
      double dg_sum = 0;
      for (int64_t i = 0; i < s.tq; ++i)
        for (int64_t c = 0; c < d; ++c) dg_sum += static_cast<double>(q_h[i * hd.ld + c] * rq_h[i] * U[i * d + c]);
      dg_partial[pair] = dg_sum;
      // Back through the normalisation (14), with x̂̄ = g·U (or g·W): keep the part orthogonal
      // to x̂ (above eps), or all of it (below eps, where x̂ = x/eps is linear).
      auto through_norm = [&](const T* x, const T* r, const T* xhat_grad, T* dx, int64_t rows) {
        for (int64_t i = 0; i < rows; ++i) {
          T sq = 0, dot = 0;
#pragma omp simd reduction(+ : sq, dot)
          for (int64_t c = 0; c < d; ++c) {
            sq += x[i * hd.ld + c] * x[i * hd.ld + c];
            dot += x[i * hd.ld + c] * r[i] * gh * xhat_grad[i * d + c];  // x̂ · x̂̄
          }
          const T along = rows::through_norm_along(std::sqrt(sq), static_cast<T>(s.eps), dot);
          for (int64_t c = 0; c < d; ++c) {
            dx[i * hd.ld + c] = rows::through_norm_grad(x[i * hd.ld + c], r[i], gh, xhat_grad[i * d + c], along);
          }
        }
      };
      through_norm(q_h, rq_h, U, dq_h, s.tq);
      through_norm(k_h, rk_h, W, dk_h, s.tk);
    }
    if (dg && s.qknorm()) {  // (13), summed in (b, h) order
      T* out_g = dg->data<T>();
      if (s.per_head_g) {
        for (int64_t h = 0; h < s.heads; ++h) {
          double total = 0;
          for (int64_t b = 0; b < s.batch; ++b) total += dg_partial[b * s.heads + h];
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
