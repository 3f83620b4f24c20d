// Fused multi-head attention on the GPU, QKNorm and scaled dot-product, forward and backward.
//
// The same function as backends/cpu/cpu_attention.cpp; the equation numbers (1)–(15) refer to
// docs/qknorm-attention.md. This first version is simple rather than fast (no flash-style
// tiling): the forward writes the whole P [B, H, tq, tk] anyway, because the interface keeps it
// for the backward and returns it to users who ask.
//
// Layout (as on the CPU): q, out, dq are [B, tq, H·d]; k, v, dk, dv are [B, kv_time, H·d], of
// which the first tk time steps are used; head h of a row is the columns [h·d, (h+1)·d), so
// every row of every head is read in place with row stride ld = H·d. P and the scratch dS are
// [B, H, tq, tk]; rq is [B, H, tq] and rk [B, H, tk]. A "query row" is one (b, h, i),
// numbered row = (b·H + h)·tq + i, which is also its index into rq and its row of P.
//
// Work split: one warp per row for the norms; one block (kAttnThreads threads) per query row
// for the forward, dS and dq; one block per key row (b, h, j) for dk and dv. Every sum runs in
// an order fixed by the shapes (a warp/block tree, or a plain loop over keys or queries in
// order), with no atomics, so results repeat bit for bit. Sums accumulate in the tensor's
// dtype, as the CPU kernel does; the dg partials in float64, as on the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/error.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::block_max;
using cuda::block_sum;
using cuda::dispatch;
using cuda::max_keep_nan;
using cuda::warp_sum;

// Threads of the per-row kernels (4 warps): also the length of the shared weight chunk below.
constexpr int kAttnThreads = 128;
// Threads of the norm kernel (one warp per row, 8 rows per block) and of the dg reduction.
constexpr int kNormThreads = 256;
// Per-row kernels loop over rows with a block stride; at most this many blocks.
constexpr int64_t kMaxRowBlocks = int64_t{1} << 20;

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(rows, kMaxRowBlocks)));
}

// The AttentionSpec as plain values a kernel can take by value (no std::vector).
struct AttnDims {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, d = 0, kv_time = 0;
  int64_t ld = 0;  // H·d: the row stride of q, k, v, out and their gradients
  bool qknorm = true, per_head_g = false, causal = false;
  int64_t query_offset = 0;
  double scale = 1.0, eps = 1e-6;
  bool dropout_on = false;  // dropout > 0
  uint32_t threshold = 0;   // keep element e when its stream word is >= threshold
  double keep_scale = 1.0;  // 1 / (1 − p)
  RandomStream rs;
};

AttnDims dims_of(const AttentionSpec& spec) {
  AttnDims s;
  s.batch = spec.batch;
  s.heads = spec.heads;
  s.tq = spec.tq;
  s.tk = spec.tk;
  s.d = spec.head_dim;
  s.kv_time = spec.kv_time;
  s.ld = spec.heads * spec.head_dim;
  s.qknorm = spec.qknorm;
  s.per_head_g = spec.per_head_g;
  s.causal = spec.causal;
  s.query_offset = spec.query_offset;
  s.scale = spec.scale;
  s.eps = spec.eps;
  s.dropout_on = spec.dropout > 0;
  // Exactly as DropoutMask in cpu_attention.cpp.
  s.threshold = dropout_threshold(spec.dropout);
  s.keep_scale = 1.0 / (1.0 - spec.dropout);
  s.rs = spec.rs;
  return s;
}

// key_lengths on the device ([B] i64), or an undefined tensor when there is no padding.
Tensor key_lengths_on_device(const AttentionSpec& spec) {
  if (spec.key_lengths.empty()) return Tensor();
  return Tensor::from_ids(spec.key_lengths, Shape{static_cast<int64_t>(spec.key_lengths.size())},
                          Device::cuda);
}

// ---- small device helpers ----

using cuda::exp_of;
using cuda::sqrt_of;

// The keys visible to query i of batch entry b are a prefix j < visible_keys (the mask M of
// (3)): padding hides j >= key_lengths[b], the causal mask hides j > i + query_offset.
// Same as visible_keys in cpu_attention.cpp; key_lengths is null when there is no padding.
__device__ inline int64_t visible_keys(const AttnDims& s, const int64_t* key_lengths, int64_t b,
                                       int64_t i) {
  int64_t key_length = s.tk;
  if (key_lengths != nullptr && key_lengths[b] < key_length) key_length = key_lengths[b];
  int64_t end = key_length;
  if (s.causal && i + s.query_offset + 1 < end) end = i + s.query_offset + 1;
  return end < 0 ? 0 : (end > s.tk ? s.tk : end);
}

// The dropout factor z/(1 − p) of (5) for element `element` = row·tk + j of P: the element
// reads word element % 4 of Philox block first_block + element / 4 (as the CPU does).
template <typename T>
__device__ inline T dropout_factor(const AttnDims& s, int64_t element) {
  const uint64_t e = static_cast<uint64_t>(element);
  const philox::Block block =
      philox::random_block(s.rs.seed, s.rs.stream, s.rs.first_block + e / 4);
  const uint32_t slot = static_cast<uint32_t>(e % 4);
  // A select rather than block.v[slot], which would put the block in local memory.
  const uint32_t word = slot == 0   ? block.v[0]
                        : slot == 1 ? block.v[1]
                        : slot == 2 ? block.v[2]
                                    : block.v[3];
  return word >= s.threshold ? static_cast<T>(s.keep_scale) : T(0);
}

// The gain of head h: g[h] (per head), g[0] (shared), or 1 for the scaled dot-product.
template <typename T>
__device__ inline T head_gain(const AttnDims& s, const T* g, int64_t h) {
  if (!s.qknorm) return T(1);
  return s.per_head_g ? g[h] : g[0];
}

// out_row[c] = Σ_{t<n} weight(t) · row(t)[c] for every c < d, added in the order t = 0, 1, …,
// so the result does not depend on the block size. Thread x owns the columns c ≡ x (mod
// blockDim.x) of out_row (consecutive threads read consecutive columns of row(t): coalesced).
// The weights are staged blockDim.x at a time in `chunk` (shared, kAttnThreads values); the
// running sum lives in out_row between chunks, stored and reloaded exactly, so chunking does
// not change the result. n == 0 gives 0. Called by the whole block (it synchronises).
template <typename T, typename Weight, typename Row>
__device__ void weighted_row_sum(int64_t n, int64_t d, Weight weight, Row row, T* out_row,
                                 T* chunk) {
  const int64_t tid = threadIdx.x, threads = blockDim.x;
  if (n == 0) {
    for (int64_t c = tid; c < d; c += threads) out_row[c] = T(0);
    return;
  }
  for (int64_t start = 0; start < n; start += threads) {
    const int64_t len = n - start < threads ? n - start : threads;
    __syncthreads();  // the previous chunk is used up; earlier global writes are visible
    if (tid < len) chunk[tid] = weight(start + tid);
    __syncthreads();
    for (int64_t c = tid; c < d; c += threads) {
      T acc = start == 0 ? T(0) : out_row[c];
      for (int64_t t = 0; t < len; ++t) acc += chunk[t] * row(start + t)[c];
      out_row[c] = acc;
    }
  }
}

// Back through x̂ = r·x, r = 1/max(‖x‖, eps) (14), for one row x of length d, with the gradient
// of x̂ given as gain·grad_row (grad_row holds U or V of (13) on entry):
//   dx = r (gain·grad − x̂ (x̂ · gain·grad))   when ‖x‖ > eps,   dx = r · gain·grad   otherwise,
// written over grad_row. Same operation order as through_norm in cpu_attention.cpp. Thread x
// owns the columns c ≡ x (mod blockDim.x), as in weighted_row_sum. Called by the whole block.
template <typename T>
__device__ void through_norm(const T* x, T r, T gain, T eps, int64_t d, T* grad_row, T* reduce) {
  T local_sq = 0, local_dot = 0;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    local_sq += x[c] * x[c];
    local_dot += x[c] * r * gain * grad_row[c];  // x̂ · x̂̄
  }
  const T sq = block_sum(local_sq, reduce);
  const T dot = block_sum(local_dot, reduce);
  const T along = sqrt_of(sq) > eps ? dot : T(0);
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    grad_row[c] = r * (gain * grad_row[c] - x[c] * r * along);
  }
}

// ---- forward ----

// (1) r[row] = 1 / max(‖x_row‖, eps) for the rows of one tensor, row = (b·H + h)·steps + t
// (the layout of rq [B, H, tq] and rk [B, H, tk]); x_row is time step t of batch entry b, head
// h: x + (b·time_stride + t)·ld + h·d, length d. One warp per row (lanes split d, warp_sum);
// a grid-stride loop over rows in steps of whole warps.
template <typename T>
__global__ void inverse_norms_kernel(const T* x, int64_t rows, int64_t heads, int64_t steps,
                                     int64_t time_stride, int64_t d, int64_t ld, double eps,
                                     T* r) {
  const int lane = threadIdx.x % 32;
  const int64_t first_warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warp_step = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const T eps_t = static_cast<T>(eps);
  for (int64_t row = first_warp; row < rows; row += warp_step) {  // the same row on every lane
    const int64_t t = row % steps, bh = row / steps;
    const int64_t h = bh % heads, b = bh / heads;
    const T* xr = x + (b * time_stride + t) * ld + h * d;
    T sum = 0;
    for (int64_t c = lane; c < d; c += 32) sum += xr[c] * xr[c];
    sum = warp_sum(sum);
    if (lane == 0) {
      const T norm = sqrt_of(sum);
      r[row] = T(1) / (norm < eps_t ? eps_t : norm);  // std::max(norm, eps), NaN stays NaN
    }
  }
}

// One query row (b, h, i) per block, row = (b·H + h)·tq + i; n = visible_keys(b, i):
//   (2)–(3) logits, written into P's row [tk]:
//            qknorm      S_ij = (q_i·k_j) · ((g_h · rq_i) · rk_j)     for j < n
//            scaled_dot  S_ij = (q_i·k_j) · scale                      for j < n
//           one warp per key j (keys warp, warp + 4, …; lanes split d, warp_sum);
//   (4)     P_ij = exp(S_ij − m) / Σ_j' exp(S_ij' − m), m = max_j S_ij, over j < n (block_max,
//           block_sum); P_ij = 0 for j >= n, so a row with no visible key is all 0;
//   (5)–(6) out_i = Σ_{j<tk} P'_ij v_j, P'_ij = z_ij/(1 − p) · P_ij (P' = P without dropout),
//           threads over the d columns, keys added in order (weighted_row_sum).
// As on the CPU (one GEMM over all tk keys), masked keys contribute 0 · v_j.
template <typename T>
__global__ void attention_forward_kernel(AttnDims s, const int64_t* key_lengths, const T* q,
                                         const T* k, const T* v, const T* g, const T* rq,
                                         const T* rk, T* out, T* probs) {
  __shared__ T chunk[kAttnThreads];
  __shared__ T reduce[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t rows = s.batch * s.heads * s.tq;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {  // the same row on every thread
    const int64_t i = row % s.tq, bh = row / s.tq;
    const int64_t h = bh % s.heads, b = bh / s.heads;
    const int64_t n = visible_keys(s, key_lengths, b, i);
    const T* q_i = q + (b * s.tq + i) * s.ld + h * s.d;   // [d]
    const T* k_h = k + b * s.kv_time * s.ld + h * s.d;    // key j: k_h + j·ld
    const T* v_h = v + b * s.kv_time * s.ld + h * s.d;    // value j: v_h + j·ld
    T* out_i = out + (b * s.tq + i) * s.ld + h * s.d;     // [d]
    T* p_row = probs + row * s.tk;                        // [tk]
    // The factor after the raw product: g_h·rq_i (times rk_j below) or scale.
    const T coef = s.qknorm ? head_gain(s, g, h) * rq[row] : static_cast<T>(s.scale);
    const T* rk_h = s.qknorm ? rk + bh * s.tk : nullptr;  // [tk]

    // (2)–(3): the logits of the visible keys; 0 for the hidden ones.
    for (int64_t j = warp; j < n; j += warps) {  // the same j on every lane of a warp
      const T* k_j = k_h + j * s.ld;
      T dot = 0;
      for (int64_t c = lane; c < s.d; c += 32) dot += q_i[c] * k_j[c];
      dot = warp_sum(dot);
      if (lane == 0) p_row[j] = s.qknorm ? dot * (coef * rk_h[j]) : dot * coef;
    }
    for (int64_t j = n + threadIdx.x; j < s.tk; j += blockDim.x) p_row[j] = T(0);
    __syncthreads();  // the logits are in p_row for every thread to read

    // (4): softmax over j < n, in place (n is the same on every thread of the block).
    if (n > 0) {
      T local_max = static_cast<T>(-INFINITY);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        local_max = max_keep_nan(local_max, p_row[j]);
      }
      const T m = block_max(local_max, reduce);
      T local_sum = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const T e = exp_of(p_row[j] - m);
        p_row[j] = e;
        local_sum += e;
      }
      const T inv = T(1) / block_sum(local_sum, reduce);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) p_row[j] *= inv;
    }

    // (5)–(6): out_i = Σ_j P'_ij v_j (weighted_row_sum synchronises before reading p_row).
    weighted_row_sum<T>(
        s.tk, s.d,
        [&](int64_t j) {
          const T p = p_row[j];
          return s.dropout_on ? p * dropout_factor<T>(s, row * s.tk + j) : p;
        },
        [&](int64_t j) { return v_h + j * s.ld; }, out_i, chunk);
  }
}

// ---- backward ----

// dS, one query row (b, h, i) per block (row = (b·H + h)·tq + i), for every key j < tk:
//   (10)    D_i = dout_i · out_i                          (block_sum over d)
//   (8)–(9) dP_ij = (dout_i · v_j) · z_ij/(1 − p)         (one warp per key, warp_sum; no
//                                                           factor without dropout)
//   (11)    dS_ij = P_ij (dP_ij − D_i)                    written to ds [B, H, tq, tk]
// Masked keys have P_ij = 0, hence dS_ij = 0.
template <typename T>
__global__ void attention_ds_kernel(AttnDims s, const T* v, const T* out, const T* probs,
                                    const T* dout, T* ds) {
  __shared__ T reduce[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t rows = s.batch * s.heads * s.tq;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % s.tq, bh = row / s.tq;
    const int64_t h = bh % s.heads, b = bh / s.heads;
    const T* do_i = dout + (b * s.tq + i) * s.ld + h * s.d;  // [d]
    const T* o_i = out + (b * s.tq + i) * s.ld + h * s.d;    // [d]
    const T* v_h = v + b * s.kv_time * s.ld + h * s.d;       // value j: v_h + j·ld
    const T* p_row = probs + row * s.tk;                     // [tk]
    T* ds_row = ds + row * s.tk;                             // [tk]
    T local = 0;
    for (int64_t c = threadIdx.x; c < s.d; c += blockDim.x) local += do_i[c] * o_i[c];
    const T D = block_sum(local, reduce);
    for (int64_t j = warp; j < s.tk; j += warps) {  // the same j on every lane of a warp
      const T* v_j = v_h + j * s.ld;
      T dot = 0;
      for (int64_t c = lane; c < s.d; c += 32) dot += do_i[c] * v_j[c];
      dot = warp_sum(dot);
      if (lane == 0) {
        const T dp = s.dropout_on ? dot * dropout_factor<T>(s, row * s.tk + j) : dot;
        ds_row[j] = p_row[j] * (dp - D);
      }
    }
  }
}

// dq, one query row (b, h, i) per block (row = (b·H + h)·tq + i); threads over the d columns,
// keys added in order (weighted_row_sum):
//   scaled_dot (15): dq_i = scale · Σ_j dS_ij k_j
//   qknorm (13):     U_i = Σ_j (dS_ij rk_j) k_j, so that q̂̄_i = g_h U_i; then
//                    dg partial (12): Σ_c (q_ic rq_i) U_ic in float64 -> dg_partial[row]
//                    (14): dq_i = through_norm(q_i, rq_i, g_h, U_i)
// With tk == 0 (no keys at all) dq_i = 0 and the partial is 0, as on the CPU.
// dg_partial ([B·H·tq] f64) is null when dg is not wanted.
template <typename T>
__global__ void attention_dq_kernel(AttnDims s, const T* q, const T* k, const T* g, const T* rq,
                                    const T* rk, const T* ds, T* dq, double* dg_partial) {
  __shared__ T chunk[kAttnThreads];
  __shared__ T reduce[32];
  __shared__ double reduce_f64[32];
  const int64_t rows = s.batch * s.heads * s.tq;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % s.tq, bh = row / s.tq;
    const int64_t h = bh % s.heads, b = bh / s.heads;
    const T* q_i = q + (b * s.tq + i) * s.ld + h * s.d;  // [d]
    const T* k_h = k + b * s.kv_time * s.ld + h * s.d;   // key j: k_h + j·ld
    const T* ds_row = ds + row * s.tk;                   // [tk]
    T* dq_i = dq + (b * s.tq + i) * s.ld + h * s.d;      // [d]
    if (s.tk == 0) {
      for (int64_t c = threadIdx.x; c < s.d; c += blockDim.x) dq_i[c] = T(0);
      if (dg_partial != nullptr && threadIdx.x == 0) dg_partial[row] = 0.0;
      continue;
    }
    auto key_row = [&](int64_t j) { return k_h + j * s.ld; };
    if (!s.qknorm) {
      weighted_row_sum<T>(s.tk, s.d, [&](int64_t j) { return ds_row[j]; }, key_row, dq_i, chunk);
      const T scale = static_cast<T>(s.scale);
      for (int64_t c = threadIdx.x; c < s.d; c += blockDim.x) dq_i[c] = scale * dq_i[c];
      continue;
    }
    const T* rk_h = rk + bh * s.tk;  // [tk]
    // U_i, kept in dq_i until through_norm replaces it by the gradient.
    weighted_row_sum<T>(
        s.tk, s.d, [&](int64_t j) { return ds_row[j] * rk_h[j]; }, key_row, dq_i, chunk);
    const T r = rq[row];
    const T gain = head_gain(s, g, h);
    if (dg_partial != nullptr) {  // (12): q̂_i · U_i
      double local = 0;
      for (int64_t c = threadIdx.x; c < s.d; c += blockDim.x) {
        local += static_cast<double>(q_i[c] * r * dq_i[c]);
      }
      const double total = block_sum(local, reduce_f64);
      if (threadIdx.x == 0) dg_partial[row] = total;
    }
    through_norm(q_i, r, gain, static_cast<T>(s.eps), s.d, dq_i, reduce);
  }
}

// dk and dv, one key row (b, h, j) per block, row = (b·H + h)·kv_time + j, j < kv_time;
// threads over the d columns, queries added in order (weighted_row_sum):
//   j >= tk (unused cache rows): dk_j = dv_j = 0
//   (7)         dv_j = Σ_i P'_ij dout_i,  P'_ij = z_ij/(1 − p) · P_ij
//   scaled_dot (15): dk_j = scale · Σ_i dS_ij q_i
//   qknorm (13): V_j = Σ_i (dS_ij rq_i) q_i, so that k̂̄_j = g_h V_j; then
//               (14): dk_j = through_norm(k_j, rk_j, g_h, V_j)
// P and dS are read down column j ([B, H, tq, tk], stride tk).
template <typename T>
__global__ void attention_dkdv_kernel(AttnDims s, const T* q, const T* k, const T* g,
                                      const T* rq, const T* rk, const T* probs, const T* dout,
                                      const T* ds, T* dk, T* dv) {
  __shared__ T chunk[kAttnThreads];
  __shared__ T reduce[32];
  const int64_t rows = s.batch * s.heads * s.kv_time;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t j = row % s.kv_time, bh = row / s.kv_time;
    const int64_t h = bh % s.heads, b = bh / s.heads;
    const int64_t kv_offset = (b * s.kv_time + j) * s.ld + h * s.d;
    T* dk_j = dk + kv_offset;  // [d]
    T* dv_j = dv + kv_offset;  // [d]
    if (j >= s.tk) {
      for (int64_t c = threadIdx.x; c < s.d; c += blockDim.x) {
        dk_j[c] = T(0);
        dv_j[c] = T(0);
      }
      continue;
    }
    const T* k_j = k + kv_offset;                          // [d]
    const T* q_h = q + b * s.tq * s.ld + h * s.d;          // query i: q_h + i·ld
    const T* do_h = dout + b * s.tq * s.ld + h * s.d;      // dout row i: do_h + i·ld
    const int64_t first = bh * s.tq * s.tk + j;            // element (b, h, 0, j) of P and dS
    // (7): dv_j = Σ_i P'_ij dout_i.
    weighted_row_sum<T>(
        s.tq, s.d,
        [&](int64_t i) {
          const T p = probs[first + i * s.tk];
          return s.dropout_on ? p * dropout_factor<T>(s, first + i * s.tk) : p;
        },
        [&](int64_t i) { return do_h + i * s.ld; }, dv_j, chunk);
    auto query_row = [&](int64_t i) { return q_h + i * s.ld; };
    if (!s.qknorm) {  // (15)
      weighted_row_sum<T>(
          s.tq, s.d, [&](int64_t i) { return ds[first + i * s.tk]; }, query_row, dk_j, chunk);
      const T scale = static_cast<T>(s.scale);
      for (int64_t c = threadIdx.x; c < s.d; c += blockDim.x) dk_j[c] = scale * dk_j[c];
      continue;
    }
    const T* rq_h = rq + bh * s.tq;  // [tq]
    // V_j, kept in dk_j until through_norm replaces it by the gradient.
    weighted_row_sum<T>(
        s.tq, s.d, [&](int64_t i) { return ds[first + i * s.tk] * rq_h[i]; }, query_row, dk_j,
        chunk);
    through_norm(k_j, rk[bh * s.tk + j], head_gain(s, g, h), static_cast<T>(s.eps), s.d, dk_j,
                 reduce);
  }
}

// (12) dg from the per-query-row partials ([B·H·tq] f64, row = (b·H + h)·tq + i), one block
// per output value: per head (blockIdx.x = h) the rows of head h over every b and i, or
// (one value) every row. Threads take strided rows, then block_sum: a fixed order.
template <typename T>
__global__ void attention_dg_kernel(const double* partial, int64_t batch, int64_t heads,
                                    int64_t tq, bool per_head, T* dg) {
  __shared__ double reduce[32];
  const int64_t h = blockIdx.x;
  const int64_t count = per_head ? batch * tq : batch * heads * tq;
  double local = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t index = per_head ? ((e / tq) * heads + h) * tq + e % tq : e;
    local += partial[index];
  }
  const double total = block_sum(local, reduce);
  if (threadIdx.x == 0) dg[h] = static_cast<T>(total);
}

}  // namespace

void CudaBackend::attention_forward(const AttentionSpec& spec, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor* g, Tensor& out, Tensor& probs,
                                    Tensor& rq, Tensor& rk) {
  QKGRAD_CHECK(!spec.qknorm || g != nullptr, "attention_forward: qknorm needs the gain g");
  const AttnDims s = dims_of(spec);
  const int64_t query_rows = s.batch * s.heads * s.tq, key_rows = s.batch * s.heads * s.tk;
  if (query_rows == 0 && (!s.qknorm || key_rows == 0)) return;  // nothing to write
  const Tensor lengths = key_lengths_on_device(spec);
  const int64_t* lengths_ptr = lengths.defined() ? lengths.data<int64_t>() : nullptr;
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g_ptr = s.qknorm ? g->data<T>() : nullptr;
    if (s.qknorm) {  // (1) rq [B, H, tq], rk [B, H, tk]
      const int rows_per_block = kNormThreads / 32;
      if (query_rows > 0) {
        const int64_t blocks = (query_rows + rows_per_block - 1) / rows_per_block;
        inverse_norms_kernel<T><<<row_grid(blocks), kNormThreads>>>(
            q.data<T>(), query_rows, s.heads, s.tq, s.tq, s.d, s.ld, s.eps, rq.data<T>());
        QKGRAD_CUDA_LAUNCHED();
      }
      if (key_rows > 0) {
        const int64_t blocks = (key_rows + rows_per_block - 1) / rows_per_block;
        inverse_norms_kernel<T><<<row_grid(blocks), kNormThreads>>>(
            k.data<T>(), key_rows, s.heads, s.tk, s.kv_time, s.d, s.ld, s.eps, rk.data<T>());
        QKGRAD_CUDA_LAUNCHED();
      }
    }
    if (query_rows > 0) {
      attention_forward_kernel<T><<<row_grid(query_rows), kAttnThreads>>>(
          s, lengths_ptr, q.data<T>(), k.data<T>(), v.data<T>(), g_ptr,
          s.qknorm ? rq.data<T>() : nullptr, s.qknorm ? rk.data<T>() : nullptr, out.data<T>(),
          probs.data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
  });
}

void CudaBackend::attention_backward(const AttentionSpec& spec, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor* g, const Tensor& out,
                                     const Tensor& probs, const Tensor& rq, const Tensor& rk,
                                     const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                                     Tensor* dg) {
  QKGRAD_CHECK(!spec.qknorm || g != nullptr, "attention_backward: qknorm needs the gain g");
  const AttnDims s = dims_of(spec);
  const int64_t query_rows = s.batch * s.heads * s.tq;
  const int64_t cache_rows = s.batch * s.heads * s.kv_time;  // every row of dk and dv
  const int64_t tile = query_rows * s.tk;                     // elements of P and dS
  const bool want_dg = s.qknorm && dg != nullptr;
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g_ptr = s.qknorm ? g->data<T>() : nullptr;
    const T* rq_ptr = s.qknorm ? rq.data<T>() : nullptr;
    const T* rk_ptr = s.qknorm ? rk.data<T>() : nullptr;
    Tensor ds = Tensor::empty({tile}, q.dtype(), Device::cuda);  // dS [B, H, tq, tk]
    Tensor dg_partial;  // [B·H·tq] f64, one per query row
    if (want_dg && query_rows > 0) {
      dg_partial = Tensor::empty({query_rows}, DType::f64, Device::cuda);
    }
    double* partial_ptr = dg_partial.defined() ? dg_partial.data<double>() : nullptr;
    if (tile > 0) {
      attention_ds_kernel<T><<<row_grid(query_rows), kAttnThreads>>>(
          s, v.data<T>(), out.data<T>(), probs.data<T>(), dout.data<T>(), ds.data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
    if (query_rows > 0) {
      attention_dq_kernel<T><<<row_grid(query_rows), kAttnThreads>>>(
          s, q.data<T>(), k.data<T>(), g_ptr, rq_ptr, rk_ptr, ds.data<T>(), dq.data<T>(),
          partial_ptr);
      QKGRAD_CUDA_LAUNCHED();
    }
    if (cache_rows > 0) {
      attention_dkdv_kernel<T><<<row_grid(cache_rows), kAttnThreads>>>(
          s, q.data<T>(), k.data<T>(), g_ptr, rq_ptr, rk_ptr, probs.data<T>(), dout.data<T>(),
          ds.data<T>(), dk.data<T>(), dv.data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
    if (want_dg) {  // one value per head, or one value; 0 when there are no query rows
      const unsigned outputs = s.per_head_g ? static_cast<unsigned>(s.heads) : 1u;
      attention_dg_kernel<T><<<outputs, kNormThreads>>>(partial_ptr, s.batch, s.heads, s.tq,
                                                         s.per_head_g, dg->data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
  });
}

}  // namespace qkgrad
