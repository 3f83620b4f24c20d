// Ops that change how a tensor is seen, not what it says: reshape and dtype conversion.
#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

// y = x viewed as another shape (same storage)      dx = reshape(dy, x.shape)
Tensor reshape(const Tensor& x, const Shape& shape) {
  QKGRAD_CHECK(x.defined(), "reshape: the input tensor is undefined");
  QKGRAD_CHECK(shape.numel() == x.numel(), "reshape: cannot reshape ", x.shape(), " (", x.numel(),
               " elements) to ", shape, " (", shape.numel(), " elements)");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = x.dtype();
  impl->storage = x.impl()->storage;
  impl->offset = x.impl()->offset;
  Tensor y(std::move(impl));
  if (should_record(x)) {
    record("reshape", {x}, {y}, {}, [](BackwardContext& ctx) {
      ctx.accumulate(0, reshape(ctx.grad_output(), ctx.input(0).shape()));
    });
  }
  return y;
}

// y = x converted to another dtype                  dx = dy converted back to x's dtype
Tensor to_dtype(const Tensor& x, DType dtype) {
  QKGRAD_CHECK(x.defined(), "to(dtype): the input tensor is undefined");
  if (x.dtype() == dtype) return x;
  Tensor y = Tensor::empty(x.shape(), dtype, x.device());
  backend(x.device()).copy(x, y);
  if (should_record(x)) {
    record("to_dtype", {x}, {y}, {}, [](BackwardContext& ctx) {
      ctx.accumulate(0, to_dtype(ctx.grad_output(), ctx.input(0).dtype()));
    });
  }
  return y;
}

Tensor Tensor::reshape(const Shape& shape) const { return qkgrad::reshape(*this, shape); }
Tensor Tensor::to(DType dtype) const { return to_dtype(*this, dtype); }

}  // namespace qkgrad
