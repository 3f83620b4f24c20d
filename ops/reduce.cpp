// Reductions: sum and mean, over everything or along one axis.
//
// Backward of a sum is a broadcast: every input element contributed once to its sum, so it
// receives that sum's gradient unchanged. A mean divides by the count n on the way back too.
#include <vector>

#include "backends/backend.h"
#include "core/autograd.h"
#include "core/error.h"
#include "ops/broadcast.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

// The shape of a reduction along `axis`: that dim removed, or kept as 1.
Shape reduced_shape(const Shape& s, int axis, bool keepdim) {
  std::vector<int64_t> dims;
  for (int i = 0; i < s.rank(); ++i) {
    if (i != axis) dims.push_back(s[i]);
    else if (keepdim) dims.push_back(1);
  }
  return Shape(dims);
}

// out = scale * sum of x along axis (x viewed as [outer, n, inner]).
Tensor sum_axis_forward(const Tensor& x, int axis, bool keepdim, double scale) {
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = axis + 1; i < s.rank(); ++i) inner *= s[i];
  Tensor out = Tensor::empty(reduced_shape(s, axis, keepdim), x.dtype(), x.device());
  backend(x.device()).sum_axis(x, outer, s[axis], inner, out);
  if (scale != 1.0) backend(x.device()).scale(out, scale, out);
  return out;
}

// dx = scale * broadcast(dy) to the input's shape, dy first given back its reduced axis as 1.
Tensor broadcast_grad(const Tensor& dy, const Shape& input_shape, int axis, double scale) {
  const Tensor dy_kept = axis < 0 ? dy : reshape(dy, reduced_shape(input_shape, axis, true));
  Tensor dx = Tensor::empty(input_shape, dy.dtype(), dy.device());
  backend(dy.device()).broadcast_to(dy_kept, dx);
  if (scale != 1.0) backend(dx.device()).scale(dx, scale, dx);
  return dx;
}

Tensor reduce_all(const char* op, const Tensor& x, double scale) {
  Tensor out = Tensor::empty(Shape{}, x.dtype(), x.device());
  backend(x.device()).sum_all(x, out);
  if (scale != 1.0) backend(x.device()).scale(out, scale, out);
  if (should_record(x)) {
    record(op, {x}, {out}, {}, [scale](BackwardContext& ctx) {
      ctx.accumulate(0, broadcast_grad(ctx.grad_output(), ctx.input(0).shape(), -1, scale));
    });
  }
  return out;
}

Tensor reduce_axis(const char* op, const Tensor& x, int axis, bool keepdim, bool average) {
  QKGRAD_CHECK(x.defined(), op, ": the input tensor is undefined");
  const int a = normalize_axis(op, axis, x.rank());
  const int64_t n = x.shape()[a];
  QKGRAD_CHECK(!(average && n == 0), op, ": cannot average over axis ", axis,
               " of size 0 (shape ", x.shape(), ")");
  const double scale = average ? 1.0 / static_cast<double>(n) : 1.0;
  Tensor out = sum_axis_forward(x, a, keepdim, scale);
  if (should_record(x)) {
    record(op, {x}, {out}, {}, [a, scale](BackwardContext& ctx) {
      ctx.accumulate(0, broadcast_grad(ctx.grad_output(), ctx.input(0).shape(), a, scale));
    });
  }
  return out;
}

}  // namespace

// y = Σ x                 dx = dy (broadcast to x's shape)
Tensor sum(const Tensor& x) {
  QKGRAD_CHECK(x.defined(), "sum: the input tensor is undefined");
  return reduce_all("sum", x, 1.0);
}

// y = Σ_i x[.., i, ..]    dx[.., i, ..] = dy[..]
Tensor sum(const Tensor& x, int axis, bool keepdim) { return reduce_axis("sum", x, axis, keepdim, false); }

// y = (1/n) Σ x           dx = dy / n
Tensor mean(const Tensor& x) {
  QKGRAD_CHECK(x.defined(), "mean: the input tensor is undefined");
  QKGRAD_CHECK(x.numel() > 0, "mean: cannot average an empty tensor (shape ", x.shape(), ")");
  return reduce_all("mean", x, 1.0 / static_cast<double>(x.numel()));
}

Tensor mean(const Tensor& x, int axis, bool keepdim) { return reduce_axis("mean", x, axis, keepdim, true); }

}  // namespace qkgrad
