#include "ops/broadcast.h"

#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad {

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int i = 1; i <= rank; ++i) {  // align from the right
    const int64_t da = i <= a.rank() ? a[a.rank() - i] : 1;
    const int64_t db = i <= b.rank() ? b[b.rank() - i] : 1;
    QKGRAD_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
                 " cannot be broadcast together: dimension ", -i, " is ", da, " vs ", db,
                 " (sizes must be equal, or one of them 1)");
    dims[rank - i] = da == 1 ? db : da;
  }
  return Shape(dims);
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  const Shape& from = grad.shape();
  if (from == shape) return grad;
  // Sum over each axis of `from` that `shape` lacks or has as 1, one axis at a time, keeping
  // the axis (as size 1) so later axis numbers stay valid; then drop the leading axes.
  Tensor current = grad;
  const int shift = from.rank() - shape.rank();
  for (int axis = 0; axis < from.rank(); ++axis) {
    const int target_axis = axis - shift;
    const bool reduce = from[axis] != 1 && (target_axis < 0 || shape[target_axis] == 1);
    if (!reduce) continue;
    const Shape& cs = current.shape();
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= cs[i];
    for (int i = axis + 1; i < cs.rank(); ++i) inner *= cs[i];
    std::vector<int64_t> kept = cs.to_vector();
    kept[axis] = 1;
    Tensor reduced = Tensor::empty(Shape(kept), grad.dtype(), grad.device());
    backend(grad.device()).sum_axis(current, outer, cs[axis], inner, reduced);
    current = reduced;
  }
  return reshape(current, shape);  // same numel: only the shape changes
}

Tensor expand_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  backend(x.device()).broadcast_to(x, out);
  return out;
}

}  // namespace qkgrad
