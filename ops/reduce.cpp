// Reductions: sum and mean, over everything or along one axis.
//
// Backward of a sum is a broadcast: every input element contributed once to its sum, so it
// receives that sum's gradient unchanged. A mean divides by the count n on the way back too.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/axis.h"
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
  const AxisSplit v = split_at(x.shape(), axis);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), axis, keepdim), x.dtype(), x.device());
  backend(x.device()).sum_axis(x, v.outer, v.n, v.inner, out);
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

// ---- max, logsumexp, norm: one kernel (Backend::reduce_axis) each, over one axis or all ----

namespace {

// x viewed as [outer, n, inner] around `axis` (axis < 0: everything, as [1, numel, 1]).
struct AxisView : AxisSplit {
  Shape kept;  // the output shape with the reduced axis kept as 1 (for broadcasting back)
};

AxisView axis_view(const Shape& s, int axis) {
  AxisView v;
  if (axis < 0) {
    v.n = s.numel();
    v.kept = Shape(std::vector<int64_t>(static_cast<std::size_t>(s.rank()), 1));
  } else {
    static_cast<AxisSplit&>(v) = split_at(s, axis);
    v.kept = reduced_shape(s, axis, true);
  }
  return v;
}

// y = reduce(x) over `axis` (or everything when axis is empty), recorded with `backward_fn`,
// which receives x, y and ȳ reshaped to the kept shape, and the view.
template <typename BackwardFn>
Tensor reduce_op(const char* op, ReduceOp kind, const Tensor& x, std::optional<int> axis, bool keepdim,
                 bool empty_ok, BackwardFn backward_fn) {
  check_floating(op, x);
  const int a = axis ? normalize_axis(op, *axis, x.rank()) : -1;
  const AxisView v = axis_view(x.shape(), a);
  QKGRAD_CHECK(empty_ok || v.n > 0, op, ": cannot reduce over ", a < 0 ? "all elements" : "axis",
               a < 0 ? "" : cat(" ", *axis), " of a tensor with shape ", x.shape(), " (nothing to reduce)");
  const Shape out_shape = a < 0 ? Shape{} : reduced_shape(x.shape(), a, keepdim);
  Tensor y = Tensor::empty(out_shape, x.dtype(), x.device());
  backend(x.device()).reduce_axis(kind, x, v.outer, v.n, v.inner, y);
  if (should_record(x)) {
    record(op, {x}, {y}, {x, y}, [v, backward_fn](BackwardContext& ctx) {
      const Tensor& xs = ctx.saved(0);
      const Tensor y_kept = reshape(ctx.saved(1), v.kept);
      const Tensor dy_kept = reshape(ctx.grad_output(), v.kept);
      ctx.accumulate(0, backward_fn(xs, y_kept, dy_kept, v));
    });
  }
  return y;
}

// y = max x           x̄ = ȳ at the (first) argmax, 0 elsewhere
Tensor max_backward(const Tensor& x, const Tensor&, const Tensor& dy, const AxisView& v) {
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).max_axis_backward(x, dy, v.outer, v.n, v.inner, dx);
  return dx;
}

// y = log Σ eˣ         x̄ = ȳ ⊙ e^(x − y)   (the softmax of x along the axis, times ȳ)
// A slice of all −∞ has y = −∞ and e^(−∞ − (−∞)) = NaN; clamping y to the lowest finite value
// gives e^(−∞) = 0 there instead (as softmax defines it) and changes nothing elsewhere (y >= x).
Tensor logsumexp_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const AxisView&) {
  return exp(x - clamp(y, -3.0e38, INFINITY)) * dy;
}

// y = ‖x‖ = √(Σ x²)    x̄ = ȳ ⊙ x / y       (0 where y = 0: the subgradient at the origin)
Tensor norm_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const AxisView&) {
  const Tensor zero = Tensor::scalar(0.0, x.dtype(), x.device());
  return x * where(y, dy / y, zero);
}

}  // namespace

Tensor max(const Tensor& x) { return reduce_op("max", ReduceOp::max, x, std::nullopt, false, false, max_backward); }
Tensor max(const Tensor& x, int axis, bool keepdim) {
  return reduce_op("max", ReduceOp::max, x, axis, keepdim, false, max_backward);
}
Tensor logsumexp(const Tensor& x) {
  return reduce_op("logsumexp", ReduceOp::logsumexp, x, std::nullopt, false, false, logsumexp_backward);
}
Tensor logsumexp(const Tensor& x, int axis, bool keepdim) {
  return reduce_op("logsumexp", ReduceOp::logsumexp, x, axis, keepdim, false, logsumexp_backward);
}
Tensor norm(const Tensor& x) { return reduce_op("norm", ReduceOp::norm, x, std::nullopt, false, true, norm_backward); }
Tensor norm(const Tensor& x, int axis, bool keepdim) {
  return reduce_op("norm", ReduceOp::norm, x, axis, keepdim, true, norm_backward);
}

double sum_of_squares(const std::vector<Tensor>& xs) {
  std::vector<Device> devices;  // in the order they first appear: fixed for a given list
  for (const Tensor& x : xs) {
    if (x.defined() && std::find(devices.begin(), devices.end(), x.device()) == devices.end()) devices.push_back(x.device());
  }
  double total = 0;
  for (const Device device : devices) {
    std::vector<Tensor> on;
    for (const Tensor& x : xs) {
      if (x.defined() && x.device() == device) on.push_back(x);
    }
    total += backend(device).sum_of_squares(on);
  }
  return total;
}

}  // namespace qkgrad
