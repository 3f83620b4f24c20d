// Indexed reads: index_select, gather and embedding lookup. Their backwards scatter the
// gradient back to the rows that were read, adding up where an index repeats (a token that
// appears twice in a batch gets both gradients).
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/axis.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

// y[.., j, ..] = x[.., ids[j], ..] along axis (ids: 1-D i64)
//   x̄[.., r, ..] = Σ over j with ids[j] = r of ȳ[.., j, ..]
Tensor index_select(const Tensor& x, int axis, const Tensor& ids) {
  check_floating("index_select", x);
  check_index_tensor("index_select", ids, "ids");
  QKGRAD_CHECK(ids.rank() == 1, "index_select: ids must be 1-D, got shape ", ids.shape());
  QKGRAD_CHECK(ids.device() == x.device(), "index_select: ids are on ", device_name(ids.device()),
               " but x is on ", device_name(x.device()));
  const int a = normalize_axis("index_select", axis, x.rank());
  const AxisSplit v = split_at(x.shape(), a);
  check_ids_in_range("index_select", ids, v.n, "index", cat("axis ", axis, " of ", x.shape(), " has size ", v.n));
  std::vector<int64_t> dims = x.shape().to_vector();
  dims[static_cast<std::size_t>(a)] = ids.numel();
  Tensor y = Tensor::empty(Shape(dims), x.dtype(), x.device());
  backend(x.device()).index_select(x, ids, v.outer, v.n, v.inner, y);
  if (should_record(x)) {
    record("index_select", {x}, {y}, {ids}, [v](BackwardContext& ctx) {
      auto target = ctx.grad_target(0);
      Backend& be = backend(target.buffer.device());
      if (!target.accumulate) be.fill(target.buffer, 0.0);
      be.index_add(ctx.grad_output(), ctx.saved(0), v.outer, v.n, v.inner, target.buffer);
    });
  }
  return y;
}

// y[o, j, i] = x[o, index[o, j, i], i] along axis (index: i64, x's shape except along axis)
//   x̄[o, r, i] = Σ over j with index[o, j, i] = r of ȳ[o, j, i]
Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  check_floating("gather", x);
  check_index_tensor("gather", index, "index");
  QKGRAD_CHECK(index.device() == x.device(), "gather: index is on ", device_name(index.device()),
               " but x is on ", device_name(x.device()));
  const int a = normalize_axis("gather", axis, x.rank());
  QKGRAD_CHECK(index.rank() == x.rank(), "gather: index ", index.shape(), " must have the rank of x ", x.shape());
  for (int d = 0; d < x.rank(); ++d) {
    QKGRAD_CHECK(d == a || index.shape()[d] == x.shape()[d], "gather: index ", index.shape(),
                 " must match x ", x.shape(), " in every dim except the gather axis ", axis);
  }
  const AxisSplit v = split_at(x.shape(), a);
  check_ids_in_range("gather", index, v.n, "index", cat("axis ", axis, " of ", x.shape(), " has size ", v.n));
  const int64_t k = index.shape()[a];
  Tensor y = Tensor::empty(index.shape(), x.dtype(), x.device());
  backend(x.device()).gather(x, index, v.outer, v.n, k, v.inner, y);
  if (should_record(x)) {
    record("gather", {x}, {y}, {index}, [v, k](BackwardContext& ctx) {
      auto target = ctx.grad_target(0);
      Backend& be = backend(target.buffer.device());
      if (!target.accumulate) be.fill(target.buffer, 0.0);
      be.scatter_add(ctx.grad_output(), ctx.saved(0), v.outer, v.n, k, v.inner, target.buffer);
    });
  }
  return y;
}

// y[..., :] = weight[ids[...], :]      weight: [V, D], ids: any shape (i64), y: [ids..., D]
//   weight̄[r] = Σ over positions p with ids[p] = r of ȳ[p]
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_floating("embedding", weight, "weight");
  check_index_tensor("embedding", ids, "ids");
  QKGRAD_CHECK(weight.rank() == 2, "embedding: weight must be [vocab, dim], got ", weight.shape());
  QKGRAD_CHECK(ids.device() == weight.device(), "embedding: ids are on ", device_name(ids.device()),
               " but the weight is on ", device_name(weight.device()));
  const int64_t vocab = weight.size(0), dim = weight.size(1);
  check_ids_in_range("embedding", ids, vocab, "token id", cat("the vocabulary has ", vocab, " entries"));
  std::vector<int64_t> dims = ids.shape().to_vector();
  QKGRAD_CHECK(ids.rank() < Shape::kMaxRank, "embedding: ids of rank ", ids.rank(),
               " would give an output of rank ", ids.rank() + 1, " > ", Shape::kMaxRank);
  dims.push_back(dim);
  Tensor y = Tensor::empty(Shape(dims), weight.dtype(), weight.device());
  const Tensor flat_ids = ids.reshape({ids.numel()});
  backend(weight.device()).index_select(weight, flat_ids, 1, vocab, dim, y);
  if (should_record(weight)) {
    record("embedding", {weight}, {y}, {flat_ids}, [vocab, dim](BackwardContext& ctx) {
      auto target = ctx.grad_target(0);
      Backend& be = backend(target.buffer.device());
      if (!target.accumulate) be.fill(target.buffer, 0.0);
      be.index_add(ctx.grad_output(), ctx.saved(0), 1, vocab, dim, target.buffer);
    });
  }
  return y;
}

}  // namespace qkgrad
