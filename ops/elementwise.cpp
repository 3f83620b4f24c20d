// Elementwise ops with NumPy broadcasting, forward and backward side by side.
//
// Broadcasting in the forward pass means summing in the backward pass: if a of shape [3] was
// added to every row of b [2, 3], each element of a influenced 2 outputs, so da sums dc over
// the broadcast axis. sum_to_shape (ops/broadcast.cpp) does that for every binary op below.
#include <cmath>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/broadcast.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

Tensor binary_forward(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b) {
  check_same_dtype_device(op, a, b);
  Tensor out = Tensor::empty(broadcast_shapes(op, a.shape(), b.shape()), a.dtype(), a.device());
  backend(a.device()).binary(kind, a, b, out);
  return out;
}

// What op's derivative reads (its functor's `reads`, core/unary_functions.h).
Reads reads_of(UnaryOp op) {
  return visit_unary(op, [](auto fn) { return decltype(fn)::reads; });
}

// y = f(x) and dx = dy · f'(x), both from op's functor in core/unary_functions.h (through the
// backend's unary and unary_backward kernels). Only the tensor f' reads is saved for backward.
Tensor unary_op(UnaryOp kind, const Tensor& x, UnaryParams p = {}) {
  const char* op = unary_op_name(kind);
  check_floating(op, x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).unary(kind, p, x, y);
  if (should_record(x)) {
    const Reads reads = reads_of(kind);
    std::vector<Tensor> saved;
    if (reads == Reads::x) saved = {x};
    if (reads == Reads::y) saved = {y};
    record(op, {x}, {y}, saved, [kind, p, reads](BackwardContext& ctx) {
      const Tensor dy = ctx.grad_output();
      const Tensor* xs = reads == Reads::x ? &ctx.saved(0) : nullptr;
      const Tensor* ys = reads == Reads::y ? &ctx.saved(0) : nullptr;
      Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
      backend(dy.device()).unary_backward(kind, p, xs, ys, dy, dx, /*accumulate=*/false);
      ctx.accumulate(0, std::move(dx));
    });
  }
  return y;
}

}  // namespace

// c = a + b          da = sum_to(dc, a)      db = sum_to(dc, b)
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor c = binary_forward("add", BinaryOp::add, a, b);
  if (should_record(a, b)) {
    record("add", {a, b}, {c}, {}, [](BackwardContext& ctx) {
      const Tensor dc = ctx.grad_output();
      if (ctx.needs_grad(0)) ctx.accumulate(0, sum_to_shape(dc, ctx.input(0).shape()));
      if (ctx.needs_grad(1)) ctx.accumulate(1, sum_to_shape(dc, ctx.input(1).shape()));
    });
  }
  return c;
}

// c = a - b          da = sum_to(dc, a)      db = -sum_to(dc, b)
Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor c = binary_forward("sub", BinaryOp::sub, a, b);
  if (should_record(a, b)) {
    record("sub", {a, b}, {c}, {}, [](BackwardContext& ctx) {
      const Tensor dc = ctx.grad_output();
      if (ctx.needs_grad(0)) ctx.accumulate(0, sum_to_shape(dc, ctx.input(0).shape()));
      if (ctx.needs_grad(1)) ctx.accumulate(1, neg(sum_to_shape(dc, ctx.input(1).shape())));
    });
  }
  return c;
}

// c = a * b          da = sum_to(dc * b, a)  db = sum_to(dc * a, b)
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor c = binary_forward("mul", BinaryOp::mul, a, b);
  if (should_record(a, b)) {
    record("mul", {a, b}, {c}, {a, b}, [](BackwardContext& ctx) {
      const Tensor dc = ctx.grad_output();
      const Tensor& a = ctx.saved(0);
      const Tensor& b = ctx.saved(1);
      if (ctx.needs_grad(0)) ctx.accumulate(0, sum_to_shape(mul(dc, b), a.shape()));
      if (ctx.needs_grad(1)) ctx.accumulate(1, sum_to_shape(mul(dc, a), b.shape()));
    });
  }
  return c;
}

// c = a / b          da = sum_to(dc / b, a)  db = -sum_to(dc * a / b², b) = -sum_to(dc * c / b, b)
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor c = binary_forward("div", BinaryOp::div, a, b);
  if (should_record(a, b)) {
    record("div", {a, b}, {c}, {b, c}, [](BackwardContext& ctx) {
      const Tensor dc = ctx.grad_output();
      const Tensor& b = ctx.saved(0);
      const Tensor& c = ctx.saved(1);
      if (ctx.needs_grad(0)) ctx.accumulate(0, sum_to_shape(div(dc, b), ctx.input(0).shape()));
      if (ctx.needs_grad(1)) ctx.accumulate(1, neg(sum_to_shape(div(mul(dc, c), b), b.shape())));
    });
  }
  return c;
}

// The unary maps without parameters (neg, exp, log, tanh, relu, sqrt, rsqrt, sigmoid, gelu,
// silu, square), one line each from QKGRAD_UNARY_OPS; their math is in core/unary_functions.h.
#define QKGRAD_UNARY_FN_0(name) \
  Tensor name(const Tensor& x) { return unary_op(UnaryOp::name, x); }
#define QKGRAD_UNARY_FN_1(name)
#define QKGRAD_UNARY_FN_2(name)
#define QKGRAD_UNARY_DEFINE(name, functor, parameters, forward, backward) QKGRAD_UNARY_FN_##parameters(name)
QKGRAD_UNARY_OPS(QKGRAD_UNARY_DEFINE)
#undef QKGRAD_UNARY_DEFINE
#undef QKGRAD_UNARY_FN_0
#undef QKGRAD_UNARY_FN_1
#undef QKGRAD_UNARY_FN_2

// y = x^p            dx = p·x^(p-1)·dy
Tensor pow(const Tensor& x, double exponent) {
  QKGRAD_CHECK(std::isfinite(exponent), "pow: the exponent must be finite, got ", exponent);
  return unary_op(UnaryOp::pow, x, {exponent, 0});
}

// y = min(max(x, low), high)      dx = dy where low <= x <= high, else 0
Tensor clamp(const Tensor& x, double low, double high) {
  QKGRAD_CHECK(!(low > high), "clamp: low (", low, ") must be <= high (", high, ")");
  return unary_op(UnaryOp::clamp, x, {low, high});
}

// y = x + s          dx = dy
Tensor add_scalar(const Tensor& x, double s) { return unary_op(UnaryOp::add_scalar, x, {s, 0}); }
// y = s·x            dx = s·dy
Tensor mul_scalar(const Tensor& x, double s) { return unary_op(UnaryOp::mul_scalar, x, {s, 0}); }

// y = mask ? a : b (broadcasting all three; mask has no gradient, nonzero means true)
//   da = sum_to(mask ? dy : 0, a)       db = sum_to(mask ? 0 : dy, b)
Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b) {
  check_same_dtype_device("where", a, b);
  QKGRAD_CHECK(mask.defined(), "where: the mask tensor is undefined");
  QKGRAD_CHECK(mask.device() == a.device(), "where: the mask is on ", device_name(mask.device()),
               " but the values are on ", device_name(a.device()));
  const Shape out_shape = broadcast_shapes("where", broadcast_shapes("where", mask.shape(), a.shape()), b.shape());
  Tensor m = mask.detach();
  if (m.dtype() != a.dtype()) {
    Tensor converted = Tensor::empty(m.shape(), a.dtype(), a.device());
    backend(a.device()).copy(m, converted);
    m = converted;
  }
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  backend(a.device()).where(m, a, b, out);
  if (should_record(a, b)) {
    record("where", {a, b}, {out}, {m}, [](BackwardContext& ctx) {
      const Tensor dy = ctx.grad_output();
      const Tensor& m = ctx.saved(0);
      const Tensor zero = Tensor::scalar(0.0, dy.dtype(), dy.device());
      Backend& be = backend(dy.device());
      for (int i = 0; i < 2; ++i) {
        if (!ctx.needs_grad(i)) continue;
        Tensor routed = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
        be.where(m, i == 0 ? dy : zero, i == 0 ? zero : dy, routed);
        ctx.accumulate(i, sum_to_shape(routed, ctx.input(i).shape()));
      }
    });
  }
  return out;
}

// y = mask ? value : x, mask broadcast to x's shape     dx = mask ? 0 : dy   (through where)
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_floating("masked_fill", x);
  QKGRAD_CHECK(mask.defined(), "masked_fill: the mask tensor is undefined");
  QKGRAD_CHECK(broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(),
               "masked_fill: the mask ", mask.shape(), " must broadcast to the input's shape ",
               x.shape(), " without enlarging it");
  return where(mask, Tensor::scalar(value, x.dtype(), x.device()), x);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double b) { return add_scalar(a, b); }
Tensor operator+(double a, const Tensor& b) { return add_scalar(b, a); }
Tensor operator-(const Tensor& a, double b) { return add_scalar(a, -b); }
Tensor operator-(double a, const Tensor& b) { return add_scalar(neg(b), a); }
Tensor operator*(const Tensor& a, double b) { return mul_scalar(a, b); }
Tensor operator*(double a, const Tensor& b) { return mul_scalar(b, a); }
Tensor operator/(const Tensor& a, double b) { return mul_scalar(a, 1.0 / b); }
Tensor operator/(double a, const Tensor& b) { return mul_scalar(pow(b, -1.0), a); }

}  // namespace qkgrad
