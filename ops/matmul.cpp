// Matrix products through the backend's (batched) GEMM.
//
//   C = op(A) op(B)      op(X) = X, or Xᵀ when its transpose flag is set
//   op(A): [m, k], op(B): [k, n], C: [m, n]
// and, by the chain rule on C[i, j] = Σ_p op(A)[i, p] op(B)[p, j],
//   d op(A) = dC op(B)ᵀ        d op(B) = op(A)ᵀ dC
// so for the stored matrices (transposing back where a flag was set):
//   dA = dC op(B)ᵀ   (no trans_a)     dA = op(B) dCᵀ   (trans_a)
//   dB = op(A)ᵀ dC   (no trans_b)     dB = dCᵀ op(A)   (trans_b)
// Transposes are GEMM flags: nothing is ever transposed in memory. Gradients are written
// straight into the gradient buffers (GEMM's beta = 1 when a gradient is already there).
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

// How a matmul maps onto one batched GEMM.
struct MatmulPlan {
  bool trans_a = false, trans_b = false;
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool a_shared = false;  // a is 2-D and used by every batch entry
  bool b_shared = false;  // b is 2-D and used by every batch entry
  Shape out_shape;
};

Shape batch_part(const Shape& s) { return Shape(std::vector<int64_t>(s.begin(), s.end() - 2)); }

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_same_dtype_device("matmul", a, b);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  QKGRAD_CHECK(sa.rank() >= 2 && sb.rank() >= 2, "matmul: both inputs need at least 2 dims, got a ",
               sa, " and b ", sb, " (reshape a vector v of size n to [1, n] or [n, 1])");
  MatmulPlan p;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  const int64_t a_rows = sa[sa.rank() - 2], a_cols = sa[sa.rank() - 1];
  const int64_t b_rows = sb[sb.rank() - 2], b_cols = sb[sb.rank() - 1];
  p.m = trans_a ? a_cols : a_rows;
  p.k = trans_a ? a_rows : a_cols;
  p.n = trans_b ? b_rows : b_cols;
  const int64_t b_k = trans_b ? b_cols : b_rows;
  QKGRAD_CHECK(b_k == p.k, "matmul: inner dimensions differ: a is ", sa, trans_a ? " (transposed)" : "",
               " and b is ", sb, trans_b ? " (transposed)" : "", " (a contributes k = ", p.k,
               ", b contributes k = ", b_k, ")");
  const Shape batch_a = batch_part(sa), batch_b = batch_part(sb);
  QKGRAD_CHECK(batch_a == batch_b || sa.rank() == 2 || sb.rank() == 2,
               "matmul: batch dimensions differ: a is ", sa, " and b is ", sb, " (batch ", batch_a,
               " vs ", batch_b, "); they must be equal, or one input must be a 2-D matrix");
  const Shape& batch = sa.rank() >= sb.rank() ? batch_a : batch_b;
  p.batch = batch.numel();
  p.a_shared = sa.rank() == 2 && sb.rank() > 2;
  p.b_shared = sb.rank() == 2 && sa.rank() > 2;
  std::vector<int64_t> out = batch.to_vector();
  out.push_back(p.m);
  out.push_back(p.n);
  p.out_shape = Shape(out);
  return p;
}

GemmSpec gemm_spec(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  GemmSpec g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  return g;
}

// dA for a C of the plan, written into (or added to) A's gradient buffer.
void matmul_grad_a(const MatmulPlan& p, const Tensor& dc, const Tensor& b, BackwardContext& ctx) {
  auto target = ctx.grad_target(0);
  // dA = dC op(B)ᵀ  [m, n]x[n, k]  or, transposed back,  dA = op(B) dCᵀ  [k, n]x[n, m]
  GemmSpec g = p.trans_a ? gemm_spec(p.trans_b, true, p.k, p.m, p.n)
                         : gemm_spec(false, !p.trans_b, p.m, p.k, p.n);
  const Tensor* first = p.trans_a ? &b : &dc;
  const Tensor* second = p.trans_a ? &dc : &b;
  const int64_t stride_dc = p.m * p.n, stride_b = p.b_shared ? 0 : p.k * p.n;
  g.batch = p.batch;
  g.stride_a = p.trans_a ? stride_b : stride_dc;
  g.stride_b = p.trans_a ? stride_dc : stride_b;
  g.stride_c = p.a_shared ? 0 : p.m * p.k;  // a shared A sums its gradient over the batch
  g.beta = target.accumulate ? 1.0 : 0.0;
  backend(dc.device()).gemm(g, *first, *second, target.buffer);
}

void matmul_grad_b(const MatmulPlan& p, const Tensor& dc, const Tensor& a, BackwardContext& ctx) {
  auto target = ctx.grad_target(1);
  // dB = op(A)ᵀ dC  [k, m]x[m, n]  or, transposed back,  dB = dCᵀ op(A)  [n, m]x[m, k]
  GemmSpec g = p.trans_b ? gemm_spec(true, p.trans_a, p.n, p.k, p.m)
                         : gemm_spec(!p.trans_a, false, p.k, p.n, p.m);
  const Tensor* first = p.trans_b ? &dc : &a;
  const Tensor* second = p.trans_b ? &a : &dc;
  g.beta = target.accumulate ? 1.0 : 0.0;
  if (p.b_shared && !p.trans_a) {
    // Σ_i over the batch is one GEMM over the stacked rows: the batch joins the m dimension.
    g.k = p.batch * p.m;
  } else {
    const int64_t stride_dc = p.m * p.n, stride_a = p.a_shared ? 0 : p.m * p.k;
    g.batch = p.batch;
    g.stride_a = p.trans_b ? stride_dc : stride_a;
    g.stride_b = p.trans_b ? stride_a : stride_dc;
    g.stride_c = p.b_shared ? 0 : p.k * p.n;
  }
  backend(dc.device()).gemm(g, *first, *second, target.buffer);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const MatmulPlan p = plan_matmul(a, b, trans_a, trans_b);
  Tensor c = Tensor::empty(p.out_shape, a.dtype(), a.device());  // [..., m, n]
  GemmSpec fwd = gemm_spec(trans_a, trans_b, p.m, p.n, p.k);
  fwd.batch = p.batch;
  fwd.stride_a = p.a_shared ? 0 : p.m * p.k;
  fwd.stride_b = p.b_shared ? 0 : p.k * p.n;
  fwd.stride_c = p.m * p.n;
  backend(a.device()).gemm(fwd, a, b, c);

  if (should_record(a, b)) {
    record("matmul", {a, b}, {c}, {a, b}, [p](BackwardContext& ctx) {
      const Tensor dc = ctx.grad_output();  // [..., m, n]
      if (ctx.needs_grad(0)) matmul_grad_a(p, dc, ctx.saved(1), ctx);
      if (ctx.needs_grad(1)) matmul_grad_b(p, dc, ctx.saved(0), ctx);
    });
  }
  return c;
}

// Mixed precision: the product of the operands rounded to bf16, accumulated and returned in
// f32; the backward is matmul's with bf16(dC) and the saved bf16 operands (ops.h).
Tensor matmul_bf16(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const MatmulPlan p = plan_matmul(a, b, trans_a, trans_b);
  QKGRAD_CHECK(a.dtype() == DType::f32, "matmul_bf16: mixed precision takes f32 inputs, got ", describe(a));
  Tensor a16, b16;
  {
    NoGradGuard no_grad;  // the copies are the op's own, not steps on the tape
    a16 = a.to(DType::bf16);
    b16 = b.to(DType::bf16);
  }
  Tensor c = Tensor::empty(p.out_shape, DType::f32, a.device());  // [..., m, n]
  GemmSpec fwd = gemm_spec(trans_a, trans_b, p.m, p.n, p.k);
  fwd.batch = p.batch;
  fwd.stride_a = p.a_shared ? 0 : p.m * p.k;
  fwd.stride_b = p.b_shared ? 0 : p.k * p.n;
  fwd.stride_c = p.m * p.n;
  backend(a.device()).gemm(fwd, a16, b16, c);

  if (should_record(a, b)) {
    record("matmul_bf16", {a, b}, {c}, {a16, b16}, [p](BackwardContext& ctx) {
      Tensor dc16;
      {
        NoGradGuard no_grad;
        dc16 = ctx.grad_output().to(DType::bf16);  // [..., m, n]
      }
      if (ctx.needs_grad(0)) matmul_grad_a(p, dc16, ctx.saved(1), ctx);
      if (ctx.needs_grad(1)) matmul_grad_b(p, dc16, ctx.saved(0), ctx);
    });
  }
  return c;
}

}  // namespace qkgrad
