// The backend interface: every kernel an op needs, per device. It lives in core/ because core
// itself calls it (a tensor's storage, fills and copies); the devices are the layer above:
// backends/ implements it (backends/cpu, backends/cuda) and defines backend(Device)
// (backends/devices.cpp), set_num_threads and the CUDA queries below.
//
// Ops (ops/) validate shapes, allocate outputs and record the tape; then they call these
// kernels. Kernels know nothing about autograd and do no shape policy: they trust the shapes
// they are given. backend(Device::cpu) is backends/cpu; backend(Device::cuda) is backends/cuda
// (built with meson -Dcuda=true). A kernel a backend does not have yet throws a clear Error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/unary_functions.h"
#include "core/dtype.h"

namespace qkgrad {


// Elementwise maps y = f(x): UnaryOp and each f with its derivative are in
// core/unary_functions.h. Some take parameters (UnaryParams): pow (a = exponent), clamp (a =
// low, b = high), add_scalar (a), mul_scalar (a).
struct UnaryParams {
  double a = 0, b = 0;
};
enum class BinaryOp { add, sub, mul, div };
// Reductions of the reduce_axis kernel: max, log Σ exp (stable), and the l2 norm √(Σ x²).
enum class ReduceOp { max, logsumexp, norm };

const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);

struct AllocatorStats {
  std::size_t bytes_in_use = 0;       // handed out to live tensors
  std::size_t peak_bytes_in_use = 0;
  std::size_t bytes_cached = 0;       // freed by tensors, kept for reuse
  uint64_t cache_hits = 0;            // allocations served from the cache
  uint64_t system_allocations = 0;    // allocations that had to ask the system (malloc/cudaMalloc)
};

// C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i < batch, with op(X) = X or Xᵀ.
// Matrices are row-major and contiguous: A[i] is [m, k] ([k, m] when trans_a), B[i] is [k, n]
// ([n, k] when trans_b), C[i] is [m, n]. A stride of 0 for A or B reuses one matrix for every i;
// stride_c == 0 sums every product into the one C: C = alpha * sum_i op(A[i]) op(B[i]) + beta * C.
struct GemmSpec {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // in elements
  double alpha = 1.0, beta = 0.0;
  // Optional (linear's bias): a [n] vector added to every row of C, C = alpha·op(A)op(B) + bias
  // (beta 0, batch 1, alpha 1). A backend fuses it into the GEMM where it can (oneDNN's matmul,
  // f32 and bf16); otherwise it writes the bias into every row of C and multiplies with beta = 1.
  const Tensor* bias = nullptr;
};

// Where a random kernel reads the Philox stream (core/philox.h): element i of the output uses
// block first_block + i/4 (f32) or first_block + i/2 (f64).
struct RandomStream {
  uint64_t seed = 0, stream = 0, first_block = 0;
};
// One optimizer update's constants, the same for every element of a parameter. grad_scale is
// gradient clipping's factor min(1, max_norm / ‖g‖), applied inside the update's one pass
// (nn/optim.h, clip_factor) instead of in a pass of its own over every gradient.
struct SgdStep {
  double lr = 0, momentum = 0, weight_decay = 0, grad_scale = 1;
};
struct AdamStep {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;        // AdamW: weight decay on the parameter, not through g
  double bias1 = 1, bias2 = 1;   // 1 − β₁ᵗ and 1 − β₂ᵗ for step t
  double grad_scale = 1;
};

// The keep test of every dropout (dropout, word dropout, attention; cpu and cuda): an element is
// kept when its 32-bit stream word is >= p·2³², i.e. with probability 1 − p (p = 1 saturates at
// 2³² − 1). Computed once on the host, so every kernel draws the same mask.
inline uint32_t dropout_threshold(double p) {
  return static_cast<uint32_t>(std::min(std::ldexp(p, 32), 4294967295.0));
}
// Dropout's keep mask, kept for the backward as bits rather than floats (or a second pass of the
// generator): element i is bit i % 32 of 32-bit word i / 32, the words stored in an i64 tensor
// of dropout_mask_size(n) elements (two words each). 1/32 of the float32 activation's memory.
inline int64_t dropout_mask_size(int64_t numel) { return (numel + 63) / 64; }
inline uint64_t random_blocks_needed(DType dtype, int64_t numel) {
  const int64_t per_block = dtype == DType::f32 ? 4 : 2;
  return static_cast<uint64_t>((numel + per_block - 1) / per_block);
}

// The attention modes (ops/attention.h has their formulas and names). The fused kernels compute
// two kinds of logits, qknorm's and scaled_dot's; rms_qknorm and layer_qknorm normalise q and k
// first (ops/attention.cpp) and reach the kernels as scaled_dot.
enum class AttentionMode { qknorm, scaled_dot, rms_qknorm, layer_qknorm };
inline constexpr AttentionMode kAttentionModes[] = {AttentionMode::qknorm, AttentionMode::scaled_dot,
                                                    AttentionMode::rms_qknorm, AttentionMode::layer_qknorm};

// One call of the fused attention kernels (ops/attention.cpp, docs/qknorm-attention.md).
// q: [B, q_time, H·d] (q_time = tq), k and v: [B, kv_time, H·d] of which the first tk time
// steps are used (a KV cache may hold more), out: [B, tq, H·d]. Heads are column blocks of
// width d: head h of row t is elements [h·d, (h+1)·d). Per (b, h), with mask M (0 or −∞):
//   qknorm:      S = g · (q/‖q‖)(k/‖k‖)ᵀ + M      (norms clamped below at eps)
//   scaled_dot:  S = scale · q kᵀ + M
//   P = softmax_rows(S), P' = dropout(P), out = P' v
struct AttentionSpec {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, head_dim = 0;
  int64_t kv_time = 0;             // stored time steps of k and v (>= tk)
  AttentionMode mode = AttentionMode::qknorm;  // qknorm or scaled_dot (the kernels' two logits)
  bool qknorm() const { return mode == AttentionMode::qknorm; }
  bool per_head_g = false;         // g has one value per head, else one value
  double scale = 1.0;              // scaled_dot's 1/√d
  double eps = 1e-6;               // qknorm's norm clamp
  bool causal = false;             // key j is visible to query i only if j <= i + query_offset
  int64_t query_offset = 0;
  std::vector<int64_t> key_lengths;  // empty, or per batch entry: keys j >= length are padding
  double dropout = 0.0;            // on P; element ((b·H + h)·tq + i)·tk + j reads stream word
  RandomStream rs;                 //   (index % 4) of block first_block + index / 4
};

// What the fused attention's forward keeps for its backward, by name (Backend::attention_state
// makes the ones a backend uses; the others stay undefined).
struct AttentionState {
  Tensor probs;   // P, the probabilities before dropout [B, H, tq, tk]
  Tensor lse;     // log Σ_j exp S_ij of each query row [B, H, tq] (−∞ for a row with no visible key)
  Tensor rq, rk;  // qknorm: 1/max(‖q_i‖, eps) [B, H, tq] and 1/max(‖k_j‖, eps) [B, H, tk]
};

// The gradients of the fused attention's inputs (dg undefined: not wanted, or no g).
struct AttentionGrads {
  Tensor dq, dk, dv, dg;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // ---- memory ----
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual AllocatorStats allocator_stats() const = 0;
  virtual void release_cached_memory() = 0;  // give cached blocks back to the system
  virtual void reset_peak_memory() = 0;      // peak_bytes_in_use := bytes_in_use
  virtual void copy_from_host(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;

  // ---- kernels (defaults throw "not implemented on <device>") ----
  virtual void fill(Tensor& out, double value);
  // dst = src element by element, converting the dtype if they differ (same numel).
  virtual void copy(const Tensor& src, Tensor& dst);
  virtual void fill_uniform(Tensor& out, double low, double high, RandomStream rs);
  virtual void fill_normal(Tensor& out, double mean, double stddev, RandomStream rs);

  // y = f(x)
  virtual void unary(UnaryOp op, UnaryParams p, const Tensor& x, Tensor& y);
  // dx = dy * f'(x) (or dx += when accumulate). f' reads x, or y = f(x), or neither: the op
  // passes the one its derivative needs (see ops/elementwise.cpp) and nullptr for the other.
  virtual void unary_backward(UnaryOp op, UnaryParams p, const Tensor* x, const Tensor* y,
                              const Tensor& dy, Tensor& dx, bool accumulate);
  // out = a (op) b with NumPy broadcasting: a and b broadcast to out's shape.
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
  // out = mask != 0 ? a : b, all three broadcast to out's shape (mask has out's dtype).
  virtual void where(const Tensor& mask, const Tensor& a, const Tensor& b, Tensor& out);
  // out = x broadcast to out's shape.
  virtual void broadcast_to(const Tensor& x, Tensor& out);
  // out = alpha * x (out may be x itself).
  virtual void scale(const Tensor& x, double alpha, Tensor& out);
  // y += alpha * x (same shape).
  virtual void axpy(double alpha, const Tensor& x, Tensor& y);

  // Rotary position embeddings (ops/rope.cpp), x and y [B, T, heads·d] with d = 2m: the pair
  // (i, i + m) of each head at time t turned by the angle whose cosine and sine are cos[t, i] and
  // sin[t, i] (both [T, m]; sin negated turns back, the backward). The formula: core/row_functions.h.
  virtual void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, Tensor& y);

  // x viewed as [outer, n, inner]: out[o, i] = sum over j < n of x[o, j, i].
  virtual void sum_axis(const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out);
  // out (one element) = sum of all of x, in a fixed order (independent of thread count).
  virtual void sum_all(const Tensor& x, Tensor& out);
  // Σ x² over every element of every x in xs (gradient-norm clipping): each tensor's sum in
  // float64 in a fixed order, then the tensors' sums added in the order given. One call for all
  // the tensors, so a GPU reads one number back instead of one per tensor.
  virtual double sum_of_squares(const std::vector<Tensor>& xs);
  // x viewed as [outer, n, inner]: out[o, i] = reduce over j < n of x[o, j, i].
  virtual void reduce_axis(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                           Tensor& out);
  // The backward of max: dx[o, j, i] = dy[o, i] at the first j where x attains its maximum,
  // 0 elsewhere (dx is overwritten).
  virtual void max_axis_backward(const Tensor& x, const Tensor& dy, int64_t outer, int64_t n,
                                 int64_t inner, Tensor& dx);

  virtual void gemm(const GemmSpec& spec, const Tensor& a, const Tensor& b, Tensor& c);
  // Whether gemm multiplies bf16 operands at native speed here (mixed precision's products): ""
  // if it does, else what is missing, for a message. gemm still takes bf16 operands where it
  // is not native (correct, no faster). Default: "the <device> backend has no bf16 products".
  virtual std::string bf16_products_missing() const;

  // ---- row-wise normalisation over the last dim, x as [rows, d] (cpu: cpu_norm.cpp) ----
  // y = softmax(x) per row, or log_softmax when `log`. A row of all -inf gives 0 (log: -inf).
  virtual void softmax(const Tensor& x, Tensor& y, bool log);
  // dx = y ⊙ (dy − Σ dy ⊙ y)  (softmax)     dx = dy − eʸ Σ dy  (log_softmax); dx overwritten.
  virtual void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, bool log);
  // y = (x − mean) · rstd · gamma + beta, rstd = 1/√(var + eps) (biased variance), per row;
  // mean and rstd ([rows]) are kept for the backward.
  virtual void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                          Tensor& y, Tensor& mean, Tensor& rstd);
  // Writes dx, dgamma, dbeta (each may be null when not wanted; all overwritten).
  virtual void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& dy, Tensor* dx,
                                   Tensor* dgamma, Tensor* dbeta);
  // y = x · rstd · gamma, rstd = 1/√(mean(x²) + eps) per row (RMSNorm); rstd ([rows]) is kept.
  virtual void rms_norm(const Tensor& x, const Tensor& gamma, double eps, Tensor& y, Tensor& rstd);
  // Writes dx and dgamma (either may be null when not wanted; both overwritten).
  virtual void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& rstd, const Tensor& dy,
                                 Tensor* dx, Tensor* dgamma);
  // y = x / max(‖x‖, eps) per row; norm ([rows]) keeps ‖x‖ for the backward.
  virtual void l2_normalize(const Tensor& x, double eps, Tensor& y, Tensor& norm);
  // dx = (dy − [‖x‖ > eps] · y (y·dy)) / max(‖x‖, eps); dx overwritten.
  virtual void l2_normalize_backward(const Tensor& y, const Tensor& norm, double eps,
                                     const Tensor& dy, Tensor& dx);

  // ---- losses and regularisation (cpu: cpu_loss.cpp, cpu_random.cpp) ----
  // Label-smoothed cross-entropy per row of logits [rows, V] with targets (i64, [rows]):
  //   q = (1 − ε)·onehot(t) + ε/V,  row_loss = −Σ q log softmax(z) = lse − (1 − ε) z_t − (ε/V) Σ z
  // Rows whose target is ignore_index (padding) are not read: loss 0 and lse 0. lse ([rows]) is
  // kept for the backward.
  virtual void cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing,
                             int64_t ignore_index, Tensor& row_loss, Tensor& lse);
  // dlogits = dloss · (softmax(z) − q) per row (0 on ignored rows); dloss has one element.
  virtual void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                      double smoothing, int64_t ignore_index, const Tensor& dloss,
                                      Tensor& dlogits);
  // Inverted dropout: y = keep ? x / (1 − p) : 0, with keep[i] = (word i of the stream >= p·2³²);
  // element i reads word i % 4 of block first_block + i / 4. The keep bits go to `mask` (i64,
  // [dropout_mask_size(n)], the layout above) for dropout_backward.
  virtual void dropout(const Tensor& x, double p, RandomStream rs, Tensor& y, Tensor& mask);
  // dx = keep ? dy / (1 − p) : 0 with the bits dropout wrote (dx may be dy).
  virtual void dropout_backward(const Tensor& dy, const Tensor& mask, double p, Tensor& dx);
  // out = ids, with each id replaced by `replacement` with probability p (same stream layout).
  virtual void word_dropout(const Tensor& ids, double p, int64_t replacement, RandomStream rs,
                            Tensor& out);

  // ---- fused attention (cpu: cpu_attention.cpp, cuda: cuda_attention.cu) ----
  // The tensors the forward leaves for the backward (AttentionState), made here: which ones is
  // the backend's choice. The CPU keeps P and reads it back; the CUDA kernels keep lse and
  // recompute P (making P only when want_probs). rq and rk exist for qknorm only.
  virtual AttentionState attention_state(const AttentionSpec& spec, DType dtype, bool want_probs);
  // Writes out ([B, tq, H·d]) and the tensors of `state` that attention_state made.
  virtual void attention_forward(const AttentionSpec& spec, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor* g, Tensor& out, AttentionState& state);
  // Overwrites grads.dq, dk, dv (same shapes as q, k, v; unused cache rows get 0) and grads.dg
  // (qknorm; when defined), from out and what the forward kept in `state`.
  virtual void attention_backward(const AttentionSpec& spec, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor* g, const Tensor& out,
                                  const AttentionState& state, const Tensor& dout, AttentionGrads& grads);

  // ---- data movement (cpu: backends/cpu/cpu_index.cpp) ----
  // out = x with its axes reordered: out axis i is x axis perm[i] (out has the permuted shape).
  virtual void permute(const Tensor& x, const std::vector<int>& perm, Tensor& out);
  // src viewed as [outer, src_n, inner], dst as [outer, dst_n, inner]: for j < len,
  // dst[o, dst_start + j, i] (+)= src[o, src_start + j, i]. (Concat, slice, pad.)
  virtual void copy_block(const Tensor& src, int64_t src_n, int64_t src_start, Tensor& dst,
                          int64_t dst_n, int64_t dst_start, int64_t outer, int64_t len,
                          int64_t inner, bool accumulate);
  // x viewed as [outer, n, inner], ids (i64) as [k]: out[o, j, i] = x[o, ids[j], i].
  virtual void index_select(const Tensor& x, const Tensor& ids, int64_t outer, int64_t n,
                            int64_t inner, Tensor& out);
  // x as [n, width], ids (i64) as [k], out as [k, width]: out[j, c] = x[ids[j], c] for c < used;
  // the rest of each out row is left as it is. (A KV cache's reorder: only the steps in use.)
  virtual void index_select_prefix(const Tensor& x, const Tensor& ids, int64_t used, Tensor& out);
  // The backward of index_select: dx[o, ids[j], i] += dy[o, j, i] (repeated ids add up).
  // dx is not cleared first. Deterministic: each thread owns a slice of the inner columns.
  virtual void index_add(const Tensor& dy, const Tensor& ids, int64_t outer, int64_t n,
                         int64_t inner, Tensor& dx);
  // x as [outer, n, inner], index (i64) and out as [outer, k, inner]:
  // out[o, j, i] = x[o, index[o, j, i], i].
  virtual void gather(const Tensor& x, const Tensor& index, int64_t outer, int64_t n, int64_t k,
                      int64_t inner, Tensor& out);
  // The backward of gather: dx[o, index[o, j, i], i] += dy[o, j, i]; dx is not cleared first.
  virtual void scatter_add(const Tensor& dy, const Tensor& index, int64_t outer, int64_t n,
                           int64_t k, int64_t inner, Tensor& dx);

  // SGD with momentum, fused: g = grad_scale · grad + weight_decay · param;
  // velocity = momentum · velocity + g; param −= lr · velocity  (velocity unused if momentum 0).
  virtual void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdStep& s);
  // Adam, fused. With g = grad_scale · grad (+ weight_decay · param unless decoupled):
  //   m = β₁ m + (1 − β₁) g;  v = β₂ v + (1 − β₂) g²
  //   param −= lr · (m / bias1) / (√(v / bias2) + eps)   (− lr · weight_decay · param if decoupled)
  virtual void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamStep& s);

 protected:
  [[noreturn]] void not_implemented(const char* kernel) const;
  // GemmSpec::bias where a backend cannot fuse it: checks it (check_gemm_bias), writes it into
  // every row of c, then c += op(a) op(b) with gemm.
  void gemm_bias_in_c(const GemmSpec& g, const Tensor& a, const Tensor& b, Tensor& c);
};

// A GemmSpec's bias is a [n] vector of C's dtype, with batch 1, alpha 1 and beta 0; else an Error.
void check_gemm_bias(const GemmSpec& g, const Tensor& c);

// The backend of a device. Throws a clear Error for cuda when qkgrad was built without it.
Backend& backend(Device device);

// Flush subnormal floats to zero on the CPU (on by default; see cpu_backend.cpp). Applies to
// the calling thread and to threads it creates afterwards.
void set_flush_denormals(bool on);
bool flush_denormals();

// CPU threads used by OpenMP loops and OpenBLAS (default: all cores / OMP_NUM_THREADS).
void set_num_threads(int threads);
int num_threads();

// Where a program's work runs, for its start-up line: "cpu, 2 threads" or "cuda". The thread
// count shows a resume that left out --threads (it then takes every core).
std::string device_summary(Device device);

// What the CUDA build sees (backends/cuda); built == false without -Dcuda=true.
struct CudaInfo {
  bool built = false;
  int device_count = 0;
  std::string summary;  // one line per device, or why there is none
};
CudaInfo cuda_info();
bool cuda_available();  // built, and at least one device

}  // namespace qkgrad
