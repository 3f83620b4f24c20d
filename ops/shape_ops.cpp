// Ops that move data without arithmetic: permute/transpose (materialising), concat, slice,
// split and pad. Every backward is the same data movement run the other way.
#include <numeric>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/axis.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

Shape with_dim(const Shape& s, int axis, int64_t size) {
  std::vector<int64_t> dims = s.to_vector();
  dims[axis] = size;
  return Shape(dims);
}

// Writes (or adds) `grad` into input i's gradient at positions [start, start + len) of `axis`,
// zero elsewhere: the backward of slice and of each part of concat/pad.
void accumulate_window(BackwardContext& ctx, int i, const Tensor& grad, int axis, int64_t start) {
  const Shape& in_shape = ctx.input(i).shape();
  const AxisSplit v = split_at(in_shape, axis);
  const int64_t len = grad.shape()[axis];
  Backend& be = backend(grad.device());
  auto target = ctx.grad_target(i);
  if (!target.accumulate && len != v.n) be.fill(target.buffer, 0.0);
  be.copy_block(grad, len, 0, target.buffer, v.n, start, v.outer, len, v.inner,
                /*accumulate=*/target.accumulate || len != v.n);
}

}  // namespace

// y = x with axes reordered (y axis i = x axis dims[i])      x̄ = ȳ permuted back (inverse perm)
Tensor permute(const Tensor& x, const std::vector<int>& dims) {
  check_floating("permute", x);
  const int rank = x.rank();
  QKGRAD_CHECK(static_cast<int>(dims.size()) == rank, "permute: got ", dims.size(),
               " axes for a tensor of rank ", rank, " (shape ", x.shape(), ")");
  std::vector<int> perm(dims.size());
  std::vector<bool> seen(dims.size(), false);
  std::vector<int64_t> out_dims(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int a = normalize_axis("permute", dims[i], rank);
    QKGRAD_CHECK(!seen[a], "permute: axis ", dims[i], " appears twice in the permutation");
    seen[a] = true;
    perm[i] = a;
    out_dims[i] = x.shape()[a];
  }
  Tensor y = Tensor::empty(Shape(out_dims), x.dtype(), x.device());
  backend(x.device()).permute(x, perm, y);
  if (should_record(x)) {
    record("permute", {x}, {y}, {}, [perm](BackwardContext& ctx) {
      std::vector<int> inverse(perm.size());
      for (std::size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
      ctx.accumulate(0, permute(ctx.grad_output(), inverse));
    });
  }
  return y;
}

// y = x with axes a and b swapped (a permute)
Tensor transpose(const Tensor& x, int a, int b) {
  check_floating("transpose", x);
  std::vector<int> perm(x.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[normalize_axis("transpose", a, x.rank())], perm[normalize_axis("transpose", b, x.rank())]);
  return permute(x, perm);
}

// y = [x₁ x₂ ...] along axis         x̄ᵢ = the slice of ȳ where xᵢ was placed
Tensor concat(const std::vector<Tensor>& xs, int axis) {
  QKGRAD_CHECK(!xs.empty(), "concat: needs at least one tensor");
  const Tensor& first = xs[0];
  check_floating("concat", first);
  const int a = normalize_axis("concat", axis, first.rank());
  int64_t total = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    check_same_dtype_device("concat", first, xs[i]);
    QKGRAD_CHECK(xs[i].rank() == first.rank() && with_dim(xs[i].shape(), a, 0) == with_dim(first.shape(), a, 0),
                 "concat: tensor ", i, " has shape ", xs[i].shape(), " but tensor 0 has ", first.shape(),
                 "; all dims except the concat axis ", axis, " must match");
    total += xs[i].shape()[a];
  }
  Tensor y = Tensor::empty(with_dim(first.shape(), a, total), first.dtype(), first.device());
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& x : xs) {
    const AxisSplit v = split_at(x.shape(), a);
    backend(x.device()).copy_block(x, v.n, 0, y, total, start, v.outer, v.n, v.inner, false);
    starts.push_back(start);
    start += v.n;
  }
  bool any = false;
  for (const Tensor& x : xs) any = any || should_record(x);
  if (any) {
    record("concat", xs, {y}, {}, [a, starts](BackwardContext& ctx) {
      const Tensor dy = ctx.grad_output();
      for (int i = 0; i < ctx.node_inputs(); ++i) {
        if (ctx.needs_grad(i)) ctx.accumulate(i, slice(dy, a, starts[i], starts[i] + ctx.input(i).shape()[a]));
      }
    });
  }
  return y;
}

// y = x[..., start:end, ...] along axis (a copy)      x̄ = ȳ in that window, 0 elsewhere
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end) {
  check_floating("slice", x);
  const int a = normalize_axis("slice", axis, x.rank());
  const AxisSplit v = split_at(x.shape(), a);
  QKGRAD_CHECK(0 <= start && start <= end && end <= v.n, "slice: [", start, ", ", end,
               ") is not a valid range of axis ", axis, " (size ", v.n, ") of shape ", x.shape());
  Tensor y = Tensor::empty(with_dim(x.shape(), a, end - start), x.dtype(), x.device());
  backend(x.device()).copy_block(x, v.n, start, y, end - start, 0, v.outer, end - start, v.inner, false);
  if (should_record(x)) {
    record("slice", {x}, {y}, {}, [a, start](BackwardContext& ctx) {
      accumulate_window(ctx, 0, ctx.grad_output(), a, start);
    });
  }
  return y;
}

// Consecutive slices of the given sizes along axis (the sizes must add up to the axis size).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  check_floating("split", x);
  const int a = normalize_axis("split", axis, x.rank());
  int64_t total = 0;
  for (int64_t s : sizes) {
    QKGRAD_CHECK(s >= 0, "split: sizes must be >= 0, got ", s);
    total += s;
  }
  QKGRAD_CHECK(total == x.shape()[a], "split: sizes add up to ", total, " but axis ", axis,
               " of shape ", x.shape(), " has size ", x.shape()[a]);
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(slice(x, a, start, start + s));
    start += s;
  }
  return parts;
}

// y = x with `before` and `after` entries of `value` added along axis     x̄ = the middle of ȳ
Tensor pad(const Tensor& x, int axis, int64_t before, int64_t after, double value) {
  check_floating("pad", x);
  const int a = normalize_axis("pad", axis, x.rank());
  QKGRAD_CHECK(before >= 0 && after >= 0, "pad: before and after must be >= 0, got ", before, " and ", after);
  const AxisSplit v = split_at(x.shape(), a);
  const int64_t n = v.n + before + after;
  Tensor y = Tensor::full(with_dim(x.shape(), a, n), value, x.dtype(), x.device());
  backend(x.device()).copy_block(x, v.n, 0, y, n, before, v.outer, v.n, v.inner, false);
  if (should_record(x)) {
    record("pad", {x}, {y}, {}, [a, before, len = v.n](BackwardContext& ctx) {
      ctx.accumulate(0, slice(ctx.grad_output(), a, before, before + len));
    });
  }
  return y;
}

}  // namespace qkgrad
