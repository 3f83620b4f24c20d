// Matrix multiplication through the backend's (batched) GEMM.
//
//   C = A B        A: [m, k], B: [k, n], C: [m, n]
//   dA = dC Bᵀ     [m, n] x [n, k]
//   dB = Aᵀ dC     [k, m] x [m, n]
// The transposes are GEMM flags: nothing is ever transposed in memory. Gradients are written
// straight into the gradient buffers (GEMM's beta = 1 when a gradient is already there).
#include <vector>

#include "backends/backend.h"
#include "core/autograd.h"
#include "core/error.h"
#include "ops/broadcast.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

// How a matmul maps onto one batched GEMM.
struct MatmulPlan {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool a_shared = false;  // a is 2-D and used by every batch entry
  bool b_shared = false;  // b is 2-D and used by every batch entry
  Shape out_shape;
};

Shape batch_part(const Shape& s) {
  return Shape(std::vector<int64_t>(s.begin(), s.end() - 2));
}

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b) {
  check_same_dtype_device("matmul", a, b);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  QKGRAD_CHECK(sa.rank() >= 2 && sb.rank() >= 2, "matmul: both inputs need at least 2 dims, got a ",
               sa, " and b ", sb, " (reshape a vector v of size n to [1, n] or [n, 1])");
  MatmulPlan p;
  p.m = sa[sa.rank() - 2];
  p.k = sa[sa.rank() - 1];
  p.n = sb[sb.rank() - 1];
  QKGRAD_CHECK(sb[sb.rank() - 2] == p.k, "matmul: inner dimensions differ: a is ", sa, " and b is ",
               sb, " (a's last dim ", p.k, " != b's second-to-last dim ", sb[sb.rank() - 2], ")");
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

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const MatmulPlan p = plan_matmul(a, b);
  Tensor c = Tensor::empty(p.out_shape, a.dtype(), a.device());  // [..., m, n]
  GemmSpec fwd;
  fwd.m = p.m;
  fwd.n = p.n;
  fwd.k = p.k;
  fwd.batch = p.batch;
  fwd.stride_a = p.a_shared ? 0 : p.m * p.k;
  fwd.stride_b = p.b_shared ? 0 : p.k * p.n;
  fwd.stride_c = p.m * p.n;
  backend(a.device()).gemm(fwd, a, b, c);

  if (should_record(a, b)) {
    record("matmul", {a, b}, {c}, {a, b}, [p](BackwardContext& ctx) {
      const Tensor dc = ctx.grad_output();  // [..., m, n]
      const Tensor& a = ctx.saved(0);       // [..., m, k]
      const Tensor& b = ctx.saved(1);       // [..., k, n]
      Backend& be = backend(dc.device());
      if (ctx.needs_grad(0)) {  // dA = dC Bᵀ, summed over the batch when A was shared
        auto target = ctx.grad_target(0);
        GemmSpec g;
        g.trans_b = true;
        g.m = p.m;
        g.n = p.k;
        g.k = p.n;
        g.batch = p.batch;
        g.stride_a = p.m * p.n;
        g.stride_b = p.b_shared ? 0 : p.k * p.n;
        g.stride_c = p.a_shared ? 0 : p.m * p.k;
        g.beta = target.accumulate ? 1.0 : 0.0;
        be.gemm(g, dc, b, target.buffer);
      }
      if (ctx.needs_grad(1)) {  // dB = Aᵀ dC, summed over the batch when B was shared
        auto target = ctx.grad_target(1);
        GemmSpec g;
        g.trans_a = true;
        g.m = p.k;
        g.n = p.n;
        g.k = p.m;
        g.beta = target.accumulate ? 1.0 : 0.0;
        if (p.b_shared) {
          // Σ_i A_iᵀ dC_i is one GEMM over the stacked rows: [k, batch·m] x [batch·m, n].
          g.k = p.batch * p.m;
        } else {
          g.batch = p.batch;
          g.stride_a = p.a_shared ? 0 : p.m * p.k;
          g.stride_b = p.m * p.n;
          g.stride_c = p.k * p.n;
        }
        be.gemm(g, a, dc, target.buffer);
      }
    });
  }
  return c;
}

}  // namespace qkgrad
