// Fused multi-head attention on the GPU, QKNorm and scaled dot-product, forward and backward,
// flash-style: no [tq, tk] matrix is written to global memory.
//
// The same function as backends/cpu/cpu_attention.cpp; the equation numbers (1)–(15) refer to
// docs/qknorm-attention.md, and docs/cuda-backend.md describes the tiling. In short:
//   forward   one block per (b, h, tile of queries): loops over tiles of keys with the online
//             softmax (a running row maximum m and sum l, the partial output rescaled when m
//             grows) and keeps only lse = m + log l per query row;
//   backward  recomputes P = exp(S − lse) tile by tile, twice: once in blocks that own a tile
//             of queries (dq: sums over keys) and once in blocks that own a tile of keys (dk,
//             dv: sums over queries), so that every output has one owner and no atomics are
//             needed: results repeat bit for bit.
// P itself is written only when a user asks for it (attention_probs_kernel).
//
// Layout (as on the CPU): q, out, dq are [B, tq, H·d]; k, v, dk, dv are [B, kv_time, H·d], of
// which the first tk time steps are used; head h of a row is the columns [h·d, (h+1)·d), read
// in place with row stride ld = H·d. rq, lse and the scratch D are [B, H, tq]; rk is [B, H, tk].
// A "query row" is one (b, h, i), numbered row = (b·H + h)·tq + i.
//
// Shared memory: a block's tiles of q, k, v, dout and the accumulators are [tile, d + 1] (the
// padding column keeps threads that read different rows at the same column off one bank); the
// tile (at most 32 rows) is the largest power of two whose tiles fit kSharedBudget. Sums
// accumulate in the tensor's dtype, as the CPU kernel does; the dg partials in float64.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_common.cuh"
#include "core/backend.h"
#include "core/error.h"
#include "core/philox.h"
#include "core/row_functions.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

using cuda::block_sum;
using cuda::dispatch;
using cuda::exp_of;
using cuda::log_of;
using cuda::max_keep_nan;
using cuda::sqrt_of;
using cuda::warp_max;
using cuda::warp_sum;

// Threads of the tile kernels (4 warps) and of the per-row kernels (one warp per row).
constexpr int kTileThreads = 128;
constexpr int kRowThreads = 256;
// The most query or key rows in a tile, and the shared memory a block may use (48 KiB: what
// every CUDA GPU gives without opting in to more).
constexpr int64_t kMaxTile = 32;
constexpr std::size_t kSharedBudget = 48 * 1024;
// Kernels loop over their work units with a block stride; at most this many blocks.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

unsigned grid_of(int64_t units) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(units, kMaxBlocks)));
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
  s.qknorm = spec.qknorm();
  s.per_head_g = spec.per_head_g;
  s.causal = spec.causal;
  s.query_offset = spec.query_offset;
  s.scale = spec.scale;
  s.eps = spec.eps;
  s.dropout_on = spec.dropout > 0;
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

// Σ_c a[c]·b[c] over c < d, in order.
template <typename T>
__device__ inline T dot_of(const T* a, const T* b, int64_t d) {
  T sum = 0;
  for (int64_t c = 0; c < d; ++c) sum += a[c] * b[c];
  return sum;
}

// Copies `rows` rows of d values (global, row stride ld) into a shared tile (row stride d + 1),
// with the whole block (consecutive threads read consecutive columns).
template <typename T>
__device__ void load_rows(T* tile, const T* src, int64_t rows, int64_t d, int64_t ld) {
  for (int64_t e = threadIdx.x; e < rows * d; e += blockDim.x) {
    const int64_t r = e / d, c = e % d;
    tile[r * (d + 1) + c] = src[r * ld + c];
  }
}

// Sets `rows` rows of a shared [tile, d + 1] tile to 0, with the whole block.
template <typename T>
__device__ void zero_rows(T* tile, int64_t rows, int64_t d) {
  for (int64_t e = threadIdx.x; e < rows * d; e += blockDim.x) tile[(e / d) * (d + 1) + e % d] = T(0);
}

// Loads key rows j0 .. j0 + cols − 1 of (b, h) into the shared tiles k and v, and their rk_j
// (1 for the scaled dot-product, where logit_of ignores it), with the whole block.
template <typename T>
__device__ void load_key_tile(const AttnDims& s, const T* k, const T* v, const T* rk, int64_t b,
                              int64_t h, int64_t j0, int64_t cols, T* k_tile, T* v_tile,
                              T* rk_tile) {
  const int64_t offset = (b * s.kv_time + j0) * s.ld + h * s.d;  // row j0 of the head
  load_rows(k_tile, k + offset, cols, s.d, s.ld);
  load_rows(v_tile, v + offset, cols, s.d, s.ld);
  for (int64_t jj = threadIdx.x; jj < cols; jj += blockDim.x) {
    rk_tile[jj] = s.qknorm ? rk[(b * s.heads + h) * s.tk + j0 + jj] : T(1);
  }
}

// The most keys any of the first `rows` query rows sees (read from shared memory by every
// thread, so all agree).
__device__ inline int64_t most_visible(const int64_t* visible, int64_t rows) {
  int64_t keys = 0;
  for (int64_t r = 0; r < rows; ++r) keys = visible[r] > keys ? visible[r] : keys;
  return keys;
}

// Back through x̂ = r·x, r = 1/max(‖x‖, eps) (14), for one row x of length d, with the gradient
// of x̂ given as gain·grad (grad holds U or W of (12)):
//   dx = r (gain·grad − x̂ (x̂ · gain·grad))   when ‖x‖ > eps,   dx = r · gain·grad   otherwise,
// written to dx (global). One warp: lanes split the columns. Same operations as through_norm
// in cpu_attention.cpp.
template <typename T>
__device__ void warp_through_norm(const T* x, T r, T gain, T eps, int64_t d, const T* grad,
                                  T* dx) {
  const int lane = threadIdx.x % 32;
  T local_sq = 0, local_dot = 0;
  for (int64_t c = lane; c < d; c += 32) {
    local_sq += x[c] * x[c];
    local_dot += x[c] * r * gain * grad[c];  // x̂ · x̂̄
  }
  const T sq = warp_sum(local_sq);
  const T dot = warp_sum(local_dot);
  const T along = rows::through_norm_along(sqrt_of(sq), eps, dot);
  for (int64_t c = lane; c < d; c += 32) dx[c] = rows::through_norm_grad(x[c], r, gain, grad[c], along);
}

// Carves one block's dynamic shared memory into arrays, in order; with a null base it only
// counts the bytes (the host sizes the launch with the same code the kernel carves with).
struct SharedCarver {
  unsigned char* base = nullptr;
  std::size_t used = 0;
  template <typename U>
  __host__ __device__ U* take(int64_t count) {
    U* p = base == nullptr ? nullptr : reinterpret_cast<U*>(base + used);
    used += static_cast<std::size_t>(count) * sizeof(U);
    return p;
  }
};

// The largest tile (a power of two <= kMaxTile) whose shared memory fits kSharedBudget, or 0.
template <typename Tiles>
int64_t pick_tile(int64_t d) {
  for (int64_t tile = kMaxTile; tile >= 1; tile /= 2) {
    if (Tiles(nullptr, tile, d).bytes <= kSharedBudget) return tile;
  }
  return 0;
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

// The logit S_ij (2)–(3) of a visible key from the raw product q_i·k_j:
//   qknorm (coef = g_h·rq_i): (q_i·k_j)·(coef·rk_j);   scaled_dot (coef = scale): (q_i·k_j)·coef
template <typename T>
__device__ inline T logit_of(const AttnDims& s, T dot, T coef, T rk_j) {
  return s.qknorm ? dot * (coef * rk_j) : dot * coef;
}

// One forward block's shared memory (tile rows of queries and of keys, head size d).
template <typename T>
struct ForwardTiles {
  int64_t* visible;  // [tile] visible keys of each query row
  T* q;              // [tile, d + 1] the block's query rows
  T* k;              // [tile, d + 1] the current key tile
  T* v;              // [tile, d + 1] its values
  T* acc;            // [tile, d + 1] Σ_j exp(S_ij − m_i)·z_ij/(1 − p)·v_j so far
  T* p;              // [tile, tile] the logits of the key tile, then their weights
  T* coef;           // [tile] g_h·rq_i (qknorm) or scale
  T* rk;             // [tile] rk_j of the key tile (qknorm)
  T* row_max;        // [tile] m_i: the largest logit so far
  T* row_sum;        // [tile] l_i: Σ_j exp(S_ij − m_i) so far
  T* rescale;        // [tile] exp(m_old − m_new) of the current key tile
  std::size_t bytes;
  __host__ __device__ ForwardTiles(unsigned char* base, int64_t tile, int64_t d) {
    SharedCarver c{base};
    visible = c.take<int64_t>(tile);
    q = c.take<T>(tile * (d + 1));
    k = c.take<T>(tile * (d + 1));
    v = c.take<T>(tile * (d + 1));
    acc = c.take<T>(tile * (d + 1));
    p = c.take<T>(tile * tile);
    coef = c.take<T>(tile);
    rk = c.take<T>(tile);
    row_max = c.take<T>(tile);
    row_sum = c.take<T>(tile);
    rescale = c.take<T>(tile);
    bytes = c.used;
  }
};

// One block per (b, h, tile of query rows i0 .. i0 + rows − 1), for key tiles j0 = 0, tile, …
// up to the most keys any of its rows sees:
//   (2)–(3) S_ij for the visible keys (−∞ for the hidden ones), one thread per (i, j);
//   (4)     online softmax, one warp per query row: m_new = max(m, max_j S_ij),
//           l = exp(m − m_new)·l + Σ_j exp(S_ij − m_new);
//   (5)–(6) acc_i = exp(m − m_new)·acc_i + Σ_j exp(S_ij − m_new)·z_ij/(1 − p)·v_j, one thread
//           per (i, c), keys added in order.
// Then out_i = acc_i / l_i (P_ij = exp(S_ij − m_i)/l_i) and lse_i = m_i + log l_i; a row with
// no visible key has out_i = 0 and lse_i = −∞, as on the CPU (P = 0).
template <typename T>
__global__ void attention_forward_kernel(AttnDims s, int64_t tile, const int64_t* key_lengths,
                                         const T* q, const T* k, const T* v, const T* g,
                                         const T* rq, const T* rk, T* out, T* lse) {
  extern __shared__ __align__(16) unsigned char attn_shared[];
  const ForwardTiles<T> sh(attn_shared, tile, s.d);
  const int64_t sd = s.d + 1;  // row stride of the shared [tile, d + 1] arrays
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const T minus_inf = static_cast<T>(-INFINITY);
  const int64_t query_tiles = (s.tq + tile - 1) / tile;
  const int64_t units = s.batch * s.heads * query_tiles;
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int64_t bh = unit / query_tiles, h = bh % s.heads, b = bh / s.heads;
    const int64_t i0 = (unit % query_tiles) * tile;
    const int64_t rows = s.tq - i0 < tile ? s.tq - i0 : tile;
    __syncthreads();  // the previous unit is done with the shared tiles
    load_rows(sh.q, q + (b * s.tq + i0) * s.ld + h * s.d, rows, s.d, s.ld);
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      sh.visible[r] = visible_keys(s, key_lengths, b, i0 + r);
      sh.coef[r] = s.qknorm ? head_gain(s, g, h) * rq[bh * s.tq + i0 + r] : static_cast<T>(s.scale);
      sh.row_max[r] = minus_inf;
      sh.row_sum[r] = T(0);
    }
    zero_rows(sh.acc, rows, s.d);
    __syncthreads();
    const int64_t keys = most_visible(sh.visible, rows);
    for (int64_t j0 = 0; j0 < keys; j0 += tile) {
      const int64_t cols = keys - j0 < tile ? keys - j0 : tile;
      __syncthreads();  // the previous key tile is used up
      load_key_tile(s, k, v, rk, b, h, j0, cols, sh.k, sh.v, sh.rk);
      __syncthreads();
      // (2)–(3): the logits, −∞ for hidden keys.
      for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
        const int64_t r = e / cols, jj = e % cols;
        T logit = minus_inf;
        if (j0 + jj < sh.visible[r]) {
          logit = logit_of(s, dot_of(sh.q + r * sd, sh.k + jj * sd, s.d), sh.coef[r], sh.rk[jj]);
        }
        sh.p[r * tile + jj] = logit;
      }
      __syncthreads();
      // (4): the online softmax, one warp per query row.
      for (int64_t r = warp; r < rows; r += warps) {
        T* p_row = sh.p + r * tile;
        T local_max = minus_inf;
        for (int64_t jj = lane; jj < cols; jj += 32) local_max = max_keep_nan(local_max, p_row[jj]);
        const T m_old = sh.row_max[r];
        const T m_new = max_keep_nan(m_old, warp_max(local_max));
        // Nothing visible yet: keep everything at 0 (exp(−∞ − −∞) would be NaN).
        const T rescale = m_new == minus_inf ? T(1) : exp_of(m_old - m_new);
        const int64_t row = bh * s.tq + i0 + r;
        T local_sum = 0;
        for (int64_t jj = lane; jj < cols; jj += 32) {
          const T logit = p_row[jj];
          const T e = logit == minus_inf ? T(0) : exp_of(logit - m_new);
          local_sum += e;
          p_row[jj] = s.dropout_on ? e * dropout_factor<T>(s, row * s.tk + j0 + jj) : e;
        }
        const T tile_sum = warp_sum(local_sum);
        if (lane == 0) {
          sh.row_sum[r] = rescale * sh.row_sum[r] + tile_sum;
          sh.row_max[r] = m_new;
          sh.rescale[r] = rescale;
        }
      }
      __syncthreads();
      // (5)–(6): acc_i = rescale_i·acc_i + Σ_j weight_ij v_j.
      for (int64_t e = threadIdx.x; e < rows * s.d; e += blockDim.x) {
        const int64_t r = e / s.d, c = e % s.d;
        const T* p_row = sh.p + r * tile;
        T a = sh.rescale[r] * sh.acc[r * sd + c];
        for (int64_t jj = 0; jj < cols; ++jj) a += p_row[jj] * sh.v[jj * sd + c];
        sh.acc[r * sd + c] = a;
      }
    }
    __syncthreads();
    // out_i = acc_i / l_i; lse_i = m_i + log l_i.
    for (int64_t e = threadIdx.x; e < rows * s.d; e += blockDim.x) {
      const int64_t r = e / s.d, c = e % s.d;
      out[(b * s.tq + i0 + r) * s.ld + h * s.d + c] =
          sh.visible[r] == 0 ? T(0) : sh.acc[r * sd + c] / sh.row_sum[r];
    }
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      lse[bh * s.tq + i0 + r] = sh.visible[r] == 0 ? minus_inf : sh.row_max[r] + log_of(sh.row_sum[r]);
    }
  }
}

// P for users who ask for it ([B, H, tq, tk], before dropout): P_ij = exp(S_ij − lse_i) for the
// visible keys, 0 for the hidden ones. One warp per element (lanes split the dot product).
template <typename T>
__global__ void attention_probs_kernel(AttnDims s, const int64_t* key_lengths, const T* q,
                                       const T* k, const T* g, const T* rq, const T* rk,
                                       const T* lse, T* probs) {
  const int lane = threadIdx.x % 32;
  const int64_t first_warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warp_step = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int64_t elements = s.batch * s.heads * s.tq * s.tk;
  for (int64_t e = first_warp; e < elements; e += warp_step) {  // the same e on every lane
    const int64_t j = e % s.tk, row = e / s.tk;
    const int64_t i = row % s.tq, bh = row / s.tq, h = bh % s.heads, b = bh / s.heads;
    if (j >= visible_keys(s, key_lengths, b, i)) {
      if (lane == 0) probs[e] = T(0);
      continue;
    }
    const T* q_i = q + (b * s.tq + i) * s.ld + h * s.d;
    const T* k_j = k + (b * s.kv_time + j) * s.ld + h * s.d;
    T dot = 0;
    for (int64_t c = lane; c < s.d; c += 32) dot += q_i[c] * k_j[c];
    dot = warp_sum(dot);
    if (lane == 0) {
      const T coef = s.qknorm ? head_gain(s, g, h) * rq[row] : static_cast<T>(s.scale);
      probs[e] = exp_of(logit_of(s, dot, coef, s.qknorm ? rk[bh * s.tk + j] : T(1)) - lse[row]);
    }
  }
}

// ---- backward ----
// With P_ij = exp(S_ij − lse_i), z the dropout mask and D_i = dout_i · out_i (10):
//   (7)     dv_j = Σ_i P_ij z_ij/(1 − p) dout_i
//   (8)–(9) dP_ij = (dout_i · v_j) z_ij/(1 − p)
//   (11)    dS_ij = P_ij (dP_ij − D_i)
//   then dq and dk from dS by (12)–(15).

// (10) D[row] = dout_i · out_i, one warp per query row.
template <typename T>
__global__ void attention_delta_kernel(AttnDims s, const T* out, const T* dout, T* delta) {
  const int lane = threadIdx.x % 32;
  const int64_t first_warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warp_step = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int64_t rows = s.batch * s.heads * s.tq;
  for (int64_t row = first_warp; row < rows; row += warp_step) {
    const int64_t i = row % s.tq, bh = row / s.tq, h = bh % s.heads, b = bh / s.heads;
    const int64_t offset = (b * s.tq + i) * s.ld + h * s.d;
    T sum = 0;
    for (int64_t c = lane; c < s.d; c += 32) sum += dout[offset + c] * out[offset + c];
    sum = warp_sum(sum);
    if (lane == 0) delta[row] = sum;
  }
}

// The query-row side of a backward tile: the per-row values both backward kernels load.
template <typename T>
struct QueryRowStats {
  int64_t* visible;  // [tile] visible keys of each query row
  T* coef;           // [tile] g_h·rq_i (qknorm) or scale
  T* lse;            // [tile] log Σ_j exp S_ij
  T* delta;          // [tile] D_i = dout_i · out_i
  __host__ __device__ void carve(SharedCarver& c, int64_t tile) {
    visible = c.take<int64_t>(tile);
    coef = c.take<T>(tile);
    lse = c.take<T>(tile);
    delta = c.take<T>(tile);
  }
};

// Loads the query-row values of rows i0 .. i0 + rows − 1 of (b, h) (the whole block).
template <typename T>
__device__ void load_query_stats(const AttnDims& s, const int64_t* key_lengths, const T* g,
                                 const T* rq, const T* lse, const T* delta, int64_t b, int64_t h,
                                 int64_t i0, int64_t rows, const QueryRowStats<T>& st) {
  const int64_t bh = b * s.heads + h;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int64_t row = bh * s.tq + i0 + r;
    st.visible[r] = visible_keys(s, key_lengths, b, i0 + r);
    st.coef[r] = s.qknorm ? head_gain(s, g, h) * rq[row] : static_cast<T>(s.scale);
    st.lse[r] = lse[row];
    st.delta[r] = delta[row];
  }
}

// For query row r (row index `row`) and key jj of the shared tiles, P_ij recomputed from lse
// and dS_ij = P_ij (dP_ij − D_i); both 0 for a hidden key. p_kept = P_ij z_ij/(1 − p).
template <typename T>
__device__ inline void recompute_p_and_ds(const AttnDims& s, const QueryRowStats<T>& st,
                                          const T* q_r, const T* dout_r, const T* k_j,
                                          const T* v_j, T rk_j, int64_t r, int64_t row,
                                          int64_t j, T& p_kept, T& ds) {
  p_kept = T(0);
  ds = T(0);
  if (j >= st.visible[r]) return;
  const T p = exp_of(logit_of(s, dot_of(q_r, k_j, s.d), st.coef[r], rk_j) - st.lse[r]);
  const T dot = dot_of(dout_r, v_j, s.d);
  const T factor = s.dropout_on ? dropout_factor<T>(s, row * s.tk + j) : T(1);
  const T dp = s.dropout_on ? dot * factor : dot;
  p_kept = p * factor;
  ds = rows::attention_ds(p, dp, st.delta[r]);
}

// One dq block's shared memory.
template <typename T>
struct QueryGradTiles {
  QueryRowStats<T> st;
  T* q;     // [tile, d + 1] the block's query rows
  T* dout;  // [tile, d + 1] their upstream gradients
  T* k;     // [tile, d + 1] the current key tile
  T* v;     // [tile, d + 1] its values
  T* acc;   // [tile, d + 1] Σ_j w_ij k_j so far (U_i for qknorm)
  T* w;     // [tile, tile] dS_ij·rk_j (qknorm) or dS_ij of the key tile
  T* rk;    // [tile] rk_j of the key tile
  std::size_t bytes;
  __host__ __device__ QueryGradTiles(unsigned char* base, int64_t tile, int64_t d) {
    SharedCarver c{base};
    st.carve(c, tile);
    q = c.take<T>(tile * (d + 1));
    dout = c.take<T>(tile * (d + 1));
    k = c.take<T>(tile * (d + 1));
    v = c.take<T>(tile * (d + 1));
    acc = c.take<T>(tile * (d + 1));
    w = c.take<T>(tile * tile);
    rk = c.take<T>(tile);
    bytes = c.used;
  }
};

// dq, one block per (b, h, tile of query rows), key tiles in order up to the most keys any of
// its rows sees:
//   scaled_dot (15): dq_i = scale · Σ_j dS_ij k_j
//   qknorm (12):     U_i = Σ_j (dS_ij rk_j) k_j, so that q̂̄_i = g_h U_i; then
//                    dg partial (13): Σ_c (q_ic rq_i) U_ic in float64 -> dg_partial[row]
//                    (14): dq_i = through_norm(q_i, rq_i, g_h, U_i)
// dg_partial ([B·H·tq] f64) is null when dg is not wanted.
template <typename T>
__global__ void attention_dq_kernel(AttnDims s, int64_t tile, const int64_t* key_lengths,
                                    const T* q, const T* k, const T* v, const T* g, const T* rq,
                                    const T* rk, const T* lse, const T* delta, const T* dout,
                                    T* dq, double* dg_partial) {
  extern __shared__ __align__(16) unsigned char attn_shared[];
  const QueryGradTiles<T> sh(attn_shared, tile, s.d);
  const int64_t sd = s.d + 1;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t query_tiles = (s.tq + tile - 1) / tile;
  const int64_t units = s.batch * s.heads * query_tiles;
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int64_t bh = unit / query_tiles, h = bh % s.heads, b = bh / s.heads;
    const int64_t i0 = (unit % query_tiles) * tile;
    const int64_t rows = s.tq - i0 < tile ? s.tq - i0 : tile;
    const int64_t q_offset = (b * s.tq + i0) * s.ld + h * s.d;  // row i0 of the head
    __syncthreads();
    load_rows(sh.q, q + q_offset, rows, s.d, s.ld);
    load_rows(sh.dout, dout + q_offset, rows, s.d, s.ld);
    load_query_stats(s, key_lengths, g, rq, lse, delta, b, h, i0, rows, sh.st);
    zero_rows(sh.acc, rows, s.d);
    __syncthreads();
    const int64_t keys = most_visible(sh.st.visible, rows);
    for (int64_t j0 = 0; j0 < keys; j0 += tile) {
      const int64_t cols = keys - j0 < tile ? keys - j0 : tile;
      __syncthreads();  // the previous key tile is used up
      load_key_tile(s, k, v, rk, b, h, j0, cols, sh.k, sh.v, sh.rk);
      __syncthreads();
      for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
        const int64_t r = e / cols, jj = e % cols;
        T p_kept, ds;
        recompute_p_and_ds(s, sh.st, sh.q + r * sd, sh.dout + r * sd, sh.k + jj * sd,
                           sh.v + jj * sd, sh.rk[jj], r, bh * s.tq + i0 + r, j0 + jj, p_kept, ds);
        sh.w[r * tile + jj] = s.qknorm ? ds * sh.rk[jj] : ds;
      }
      __syncthreads();
      for (int64_t e = threadIdx.x; e < rows * s.d; e += blockDim.x) {
        const int64_t r = e / s.d, c = e % s.d;
        const T* w_row = sh.w + r * tile;
        T a = sh.acc[r * sd + c];
        for (int64_t jj = 0; jj < cols; ++jj) a += w_row[jj] * sh.k[jj * sd + c];
        sh.acc[r * sd + c] = a;
      }
    }
    __syncthreads();
    // dq from the sums, one warp per query row.
    for (int64_t r = warp; r < rows; r += warps) {
      const int64_t row = bh * s.tq + i0 + r;
      const T* x = sh.q + r * sd;
      const T* sum = sh.acc + r * sd;
      T* dq_i = dq + q_offset + r * s.ld;
      if (!s.qknorm) {
        const T scale = static_cast<T>(s.scale);
        for (int64_t c = lane; c < s.d; c += 32) dq_i[c] = scale * sum[c];
        continue;
      }
      const T r_i = rq[row];
      if (dg_partial != nullptr) {  // (13): q̂_i · U_i
        double local = 0;
        for (int64_t c = lane; c < s.d; c += 32) local += static_cast<double>(x[c] * r_i * sum[c]);
        const double total = warp_sum(local);
        if (lane == 0) dg_partial[row] = total;
      }
      warp_through_norm(x, r_i, head_gain(s, g, h), static_cast<T>(s.eps), s.d, sum, dq_i);
    }
  }
}

// One dk/dv block's shared memory.
template <typename T>
struct KeyGradTiles {
  QueryRowStats<T> st;
  T* k;     // [tile, d + 1] the block's key rows
  T* v;     // [tile, d + 1] their values
  T* q;     // [tile, d + 1] the current query tile
  T* dout;  // [tile, d + 1] its upstream gradients
  T* dk;    // [tile, d + 1] Σ_i w_ij q_i so far (W_j for qknorm)
  T* dv;    // [tile, d + 1] Σ_i P_ij z_ij/(1 − p) dout_i so far
  T* p;     // [tile, tile] P_ij z_ij/(1 − p) of the query tile
  T* w;     // [tile, tile] dS_ij·rq_i (qknorm) or dS_ij
  T* rk;    // [tile] rk_j of the block's keys
  T* rq;    // [tile] rq_i of the query tile
  std::size_t bytes;
  __host__ __device__ KeyGradTiles(unsigned char* base, int64_t tile, int64_t d) {
    SharedCarver c{base};
    st.carve(c, tile);
    k = c.take<T>(tile * (d + 1));
    v = c.take<T>(tile * (d + 1));
    q = c.take<T>(tile * (d + 1));
    dout = c.take<T>(tile * (d + 1));
    dk = c.take<T>(tile * (d + 1));
    dv = c.take<T>(tile * (d + 1));
    p = c.take<T>(tile * tile);
    w = c.take<T>(tile * tile);
    rk = c.take<T>(tile);
    rq = c.take<T>(tile);
    bytes = c.used;
  }
};

// dk and dv, one block per (b, h, tile of key rows j0 .. j0 + cols − 1) of all kv_time rows
// (rows j >= tk, unused cache rows, get 0), query tiles in order (a tile none of whose rows
// sees key j0 is skipped):
//   (7)              dv_j = Σ_i P_ij z_ij/(1 − p) dout_i
//   scaled_dot (15): dk_j = scale · Σ_i dS_ij q_i
//   qknorm (12):     W_j = Σ_i (dS_ij rq_i) q_i, so that k̂̄_j = g_h W_j; then
//                    (14): dk_j = through_norm(k_j, rk_j, g_h, W_j)
template <typename T>
__global__ void attention_dkdv_kernel(AttnDims s, int64_t tile, const int64_t* key_lengths,
                                      const T* q, const T* k, const T* v, const T* g,
                                      const T* rq, const T* rk, const T* lse, const T* delta,
                                      const T* dout, T* dk, T* dv) {
  extern __shared__ __align__(16) unsigned char attn_shared[];
  const KeyGradTiles<T> sh(attn_shared, tile, s.d);
  const int64_t sd = s.d + 1;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t key_tiles = (s.kv_time + tile - 1) / tile;
  const int64_t units = s.batch * s.heads * key_tiles;
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int64_t bh = unit / key_tiles, h = bh % s.heads, b = bh / s.heads;
    const int64_t j0 = (unit % key_tiles) * tile;
    const int64_t cols = s.kv_time - j0 < tile ? s.kv_time - j0 : tile;  // rows of dk, dv
    const int64_t used = s.tk - j0 < 0 ? 0 : (s.tk - j0 < cols ? s.tk - j0 : cols);  // j < tk
    const int64_t kv_offset = (b * s.kv_time + j0) * s.ld + h * s.d;  // row j0 of the head
    const T* q_h = q + b * s.tq * s.ld + h * s.d;
    const T* do_h = dout + b * s.tq * s.ld + h * s.d;
    __syncthreads();
    load_key_tile(s, k, v, rk, b, h, j0, used, sh.k, sh.v, sh.rk);
    zero_rows(sh.dk, cols, s.d);
    zero_rows(sh.dv, cols, s.d);
    for (int64_t i0 = 0; used > 0 && i0 < s.tq; i0 += tile) {
      const int64_t rows = s.tq - i0 < tile ? s.tq - i0 : tile;
      __syncthreads();  // the previous query tile is used up
      load_rows(sh.q, q_h + i0 * s.ld, rows, s.d, s.ld);
      load_rows(sh.dout, do_h + i0 * s.ld, rows, s.d, s.ld);
      load_query_stats(s, key_lengths, g, rq, lse, delta, b, h, i0, rows, sh.st);
      for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        sh.rq[r] = s.qknorm ? rq[bh * s.tq + i0 + r] : T(1);
      }
      __syncthreads();
      if (most_visible(sh.st.visible, rows) <= j0) continue;  // no row of the tile sees key j0
      for (int64_t e = threadIdx.x; e < rows * used; e += blockDim.x) {
        const int64_t r = e / used, jj = e % used;
        T p_kept, ds;
        recompute_p_and_ds(s, sh.st, sh.q + r * sd, sh.dout + r * sd, sh.k + jj * sd,
                           sh.v + jj * sd, sh.rk[jj], r, bh * s.tq + i0 + r, j0 + jj, p_kept, ds);
        sh.p[r * tile + jj] = p_kept;
        sh.w[r * tile + jj] = s.qknorm ? ds * sh.rq[r] : ds;
      }
      __syncthreads();
      for (int64_t e = threadIdx.x; e < used * s.d; e += blockDim.x) {
        const int64_t jj = e / s.d, c = e % s.d;
        T a_v = sh.dv[jj * sd + c], a_k = sh.dk[jj * sd + c];
        for (int64_t r = 0; r < rows; ++r) {
          a_v += sh.p[r * tile + jj] * sh.dout[r * sd + c];
          a_k += sh.w[r * tile + jj] * sh.q[r * sd + c];
        }
        sh.dv[jj * sd + c] = a_v;
        sh.dk[jj * sd + c] = a_k;
      }
    }
    __syncthreads();
    // dk and dv from the sums, one warp per key row (0 for the rows j >= tk).
    for (int64_t jj = warp; jj < cols; jj += warps) {
      T* dk_j = dk + kv_offset + jj * s.ld;
      T* dv_j = dv + kv_offset + jj * s.ld;
      const T* sum_k = sh.dk + jj * sd;
      for (int64_t c = lane; c < s.d; c += 32) dv_j[c] = sh.dv[jj * sd + c];
      if (!s.qknorm || jj >= used) {
        const T scale = jj < used ? static_cast<T>(s.scale) : T(0);
        for (int64_t c = lane; c < s.d; c += 32) dk_j[c] = scale * sum_k[c];
        continue;
      }
      warp_through_norm(sh.k + jj * sd, sh.rk[jj], head_gain(s, g, h), static_cast<T>(s.eps),
                        s.d, sum_k, dk_j);
    }
  }
}

// (13) dg from the per-query-row partials ([B·H·tq] f64, row = (b·H + h)·tq + i), one block
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

// The tile of a kernel's shared memory for head size d, or a clear error when even one row
// does not fit (head sizes in the thousands).
template <typename Tiles>
int64_t tile_or_throw(int64_t d, DType dtype) {
  const int64_t tile = pick_tile<Tiles>(d);
  QKGRAD_CHECK(tile > 0, "attention on cuda: head size ", d, " in ", dtype_name(dtype),
               " is too large for the kernel's shared memory (", kSharedBudget / 1024,
               " KiB per block): split the width into more heads (a head size of a few hundred "
               "fits) or use --device cpu");
  return tile;
}

// Warps of kRowThreads-thread blocks for `rows` one-warp-per-row work items.
unsigned warp_grid(int64_t rows) {
  const int64_t per_block = kRowThreads / 32;
  return grid_of((rows + per_block - 1) / per_block);
}

}  // namespace

void CudaBackend::attention_forward(const AttentionSpec& spec, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor* g, Tensor& out, AttentionState& state) {
  Tensor& lse = state.lse;  // the forward's outputs, named as in the kernels
  Tensor& rq = state.rq;
  Tensor& rk = state.rk;
  Tensor& probs = state.probs;  // undefined unless the caller asked for P
  QKGRAD_CHECK(!spec.qknorm() || g != nullptr, "attention_forward: qknorm needs the gain g");
  const AttnDims s = dims_of(spec);
  const int64_t query_rows = s.batch * s.heads * s.tq, key_rows = s.batch * s.heads * s.tk;
  if (query_rows == 0 && (!s.qknorm || key_rows == 0)) return;  // nothing to write
  const Tensor lengths = key_lengths_on_device(spec);
  const int64_t* lengths_ptr = lengths.defined() ? lengths.data<int64_t>() : nullptr;
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g_ptr = s.qknorm ? g->data<T>() : nullptr;
    const T* rq_ptr = s.qknorm ? rq.data<T>() : nullptr;
    const T* rk_ptr = s.qknorm ? rk.data<T>() : nullptr;
    if (s.qknorm) {  // (1) rq [B, H, tq], rk [B, H, tk]
      if (query_rows > 0) {
        inverse_norms_kernel<T><<<warp_grid(query_rows), kRowThreads>>>(
            q.data<T>(), query_rows, s.heads, s.tq, s.tq, s.d, s.ld, s.eps, rq.data<T>());
        QKGRAD_CUDA_LAUNCHED();
      }
      if (key_rows > 0) {
        inverse_norms_kernel<T><<<warp_grid(key_rows), kRowThreads>>>(
            k.data<T>(), key_rows, s.heads, s.tk, s.kv_time, s.d, s.ld, s.eps, rk.data<T>());
        QKGRAD_CUDA_LAUNCHED();
      }
    }
    if (query_rows == 0) return;
    const int64_t tile = tile_or_throw<ForwardTiles<T>>(s.d, q.dtype());
    const int64_t units = s.batch * s.heads * ((s.tq + tile - 1) / tile);
    attention_forward_kernel<T><<<grid_of(units), kTileThreads, ForwardTiles<T>(nullptr, tile, s.d).bytes>>>(
        s, tile, lengths_ptr, q.data<T>(), k.data<T>(), v.data<T>(), g_ptr, rq_ptr, rk_ptr,
        out.data<T>(), lse.data<T>());
    QKGRAD_CUDA_LAUNCHED();
    const int64_t elements = query_rows * s.tk;
    if (probs.defined() && elements > 0) {  // a user asked for P
      attention_probs_kernel<T><<<warp_grid(elements), kRowThreads>>>(
          s, lengths_ptr, q.data<T>(), k.data<T>(), g_ptr, rq_ptr, rk_ptr, lse.data<T>(),
          probs.data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
  });
}

void CudaBackend::attention_backward(const AttentionSpec& spec, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor* g, const Tensor& out,
                                     const AttentionState& state, const Tensor& dout, AttentionGrads& grads) {
  const Tensor& lse = state.lse;  // P is recomputed from lse, tile by tile
  const Tensor& rq = state.rq;
  const Tensor& rk = state.rk;
  Tensor& dq = grads.dq;
  Tensor& dk = grads.dk;
  Tensor& dv = grads.dv;
  Tensor* dg = grads.dg.defined() ? &grads.dg : nullptr;
  QKGRAD_CHECK(!spec.qknorm() || g != nullptr, "attention_backward: qknorm needs the gain g");
  const AttnDims s = dims_of(spec);
  const int64_t query_rows = s.batch * s.heads * s.tq;
  const int64_t cache_rows = s.batch * s.heads * s.kv_time;  // every row of dk and dv
  const bool want_dg = s.qknorm && dg != nullptr;
  const Tensor lengths = key_lengths_on_device(spec);
  const int64_t* lengths_ptr = lengths.defined() ? lengths.data<int64_t>() : nullptr;
  dispatch(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g_ptr = s.qknorm ? g->data<T>() : nullptr;
    const T* rq_ptr = s.qknorm ? rq.data<T>() : nullptr;
    const T* rk_ptr = s.qknorm ? rk.data<T>() : nullptr;
    Tensor delta = Tensor::empty({query_rows}, q.dtype(), Device::cuda);  // D [B, H, tq]
    Tensor dg_partial;  // [B·H·tq] f64, one per query row
    if (want_dg && query_rows > 0) {
      dg_partial = Tensor::empty({query_rows}, DType::f64, Device::cuda);
    }
    double* partial_ptr = dg_partial.defined() ? dg_partial.data<double>() : nullptr;
    if (query_rows > 0) {
      attention_delta_kernel<T><<<warp_grid(query_rows), kRowThreads>>>(
          s, out.data<T>(), dout.data<T>(), delta.data<T>());
      QKGRAD_CUDA_LAUNCHED();
      const int64_t tile = tile_or_throw<QueryGradTiles<T>>(s.d, q.dtype());
      const int64_t units = s.batch * s.heads * ((s.tq + tile - 1) / tile);
      attention_dq_kernel<T><<<grid_of(units), kTileThreads, QueryGradTiles<T>(nullptr, tile, s.d).bytes>>>(
          s, tile, lengths_ptr, q.data<T>(), k.data<T>(), v.data<T>(), g_ptr, rq_ptr, rk_ptr,
          lse.data<T>(), delta.data<T>(), dout.data<T>(), dq.data<T>(), partial_ptr);
      QKGRAD_CUDA_LAUNCHED();
    }
    if (cache_rows > 0) {
      const int64_t tile = tile_or_throw<KeyGradTiles<T>>(s.d, q.dtype());
      const int64_t units = s.batch * s.heads * ((s.kv_time + tile - 1) / tile);
      attention_dkdv_kernel<T><<<grid_of(units), kTileThreads, KeyGradTiles<T>(nullptr, tile, s.d).bytes>>>(
          s, tile, lengths_ptr, q.data<T>(), k.data<T>(), v.data<T>(), g_ptr, rq_ptr, rk_ptr,
          lse.data<T>(), delta.data<T>(), dout.data<T>(), dk.data<T>(), dv.data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
    if (want_dg) {  // one value per head, or one value; 0 when there are no query rows
      const unsigned outputs = s.per_head_g ? static_cast<unsigned>(s.heads) : 1u;
      attention_dg_kernel<T><<<outputs, kRowThreads>>>(partial_ptr, s.batch, s.heads, s.tq,
                                                        s.per_head_g, dg->data<T>());
      QKGRAD_CUDA_LAUNCHED();
    }
  });
}

}  // namespace qkgrad
