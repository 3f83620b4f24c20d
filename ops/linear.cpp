// The fused linear layer: one GEMM with the bias folded in.
//
//   y = x Wᵀ + b        x: [..., in] (viewed as [N, in]), W: [out, in], b: [out], y: [..., out]
//   x̄ = ȳ W             [N, out] x [out, in]
//   W̄ = ȳᵀ x            [out, N] x [N, in]
//   b̄ = Σ_rows ȳ        [out]
// The bias goes to the backend's GEMM with the product (GemmSpec::bias): oneDNN's bf16 matmul
// adds it in its kernel; otherwise b is written into every row of y and GEMM adds x Wᵀ on top.
// Under MixedPrecision(bf16) (ops/precision.h) x and W are rounded to bf16 (bf16_operand) and the
// GEMMs take bf16 operands with f32 accumulation and results. The backward saves the float32
// x and W, as without mixed precision, and rounds them and ȳ again where a product reads them:
// no bf16 copy outlives its product, so the peak memory is float32's. The gradients stay f32.
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "ops/validate.h"

namespace qkgrad {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_dtype_device("linear", x, weight);
  QKGRAD_CHECK(weight.rank() == 2, "linear: weight must be [out, in], got ", weight.shape());
  QKGRAD_CHECK(x.rank() >= 1 && x.size(-1) == weight.size(1), "linear: input ", x.shape(),
               " does not end in the weight's in-features: weight is ", weight.shape(),
               " ([out, in]), so the input must be [..., ", weight.size(1), "]");
  const int64_t in = weight.size(1), out = weight.size(0);
  int64_t rows = 1;  // N: the product of the leading dims (not numel / in, which fails for in = 0)
  for (int i = 0; i + 1 < x.rank(); ++i) rows *= x.size(i);
  if (bias.defined()) {
    check_same_dtype_device("linear", x, bias);
    QKGRAD_CHECK(bias.shape() == Shape{out}, "linear: bias must be [", out, "] to match weight ",
                 weight.shape(), ", got ", bias.shape());
  }
  std::vector<int64_t> out_dims = x.shape().to_vector();
  out_dims.back() = out;
  Tensor y = Tensor::empty(Shape(out_dims), x.dtype(), x.device());  // [..., out]
  Backend& be = backend(x.device());
  // Mixed precision: the operands' bf16 copies, for this product only.
  const bool mixed = linear_precision() == Precision::bf16 && x.dtype() == DType::f32;
  Tensor xs = x, ws = weight;
  if (mixed) {
    xs = bf16_operand(x);       // [..., in]
    ws = bf16_operand(weight);  // [out, in]
  }
  GemmSpec g;  // y [N, out] (+)= x [N, in] · Wᵀ
  g.trans_b = true;
  g.m = rows;
  g.n = out;
  g.k = in;
  if (bias.defined()) g.bias = &bias;  // the backend adds it (fused into the GEMM where it can)
  be.gemm(g, xs, ws, y);

  const bool with_bias = bias.defined();
  if (should_record(x, weight) || (with_bias && should_record(bias))) {
    std::vector<Tensor> inputs = {x, weight};
    if (with_bias) inputs.push_back(bias);
    record("linear", inputs, {y}, {x, weight}, [rows, in, out, mixed](BackwardContext& ctx) {
      Tensor dy = ctx.grad_output();  // [..., out] = [N, out]
      const Tensor dy_f32 = dy;       // the bias's gradient sums it unrounded
      if (mixed) dy = bf16_operand(dy);
      Backend& be = backend(dy.device());
      if (ctx.needs_grad(0)) {  // x̄ = ȳ W
        const Tensor w = mixed ? bf16_operand(ctx.saved(1)) : ctx.saved(1);  // [out, in]
        auto target = ctx.grad_target(0);
        GemmSpec g;
        g.m = rows;
        g.n = in;
        g.k = out;
        g.beta = target.accumulate ? 1.0 : 0.0;
        be.gemm(g, dy, w, target.buffer);
      }
      if (ctx.needs_grad(1)) {  // W̄ = ȳᵀ x
        auto target = ctx.grad_target(1);
        GemmSpec g;
        g.trans_a = true;
        g.m = out;
        g.n = in;
        g.k = rows;
        g.beta = target.accumulate ? 1.0 : 0.0;
        const Tensor xs = mixed ? bf16_operand(ctx.saved(0)) : ctx.saved(0);  // [N, in]
        be.gemm(g, dy, xs, target.buffer);
      }
      if (ctx.node_inputs() == 3 && ctx.needs_grad(2)) {  // b̄ = Σ_rows ȳ
        Tensor db = Tensor::empty({out}, dy_f32.dtype(), dy_f32.device());
        be.sum_axis(dy_f32, 1, rows, out, db);
        ctx.accumulate(2, std::move(db));
      }
    });
  }
  return y;
}

}  // namespace qkgrad
