// Elementwise ops with NumPy broadcasting, forward and backward side by side.
//
// Broadcasting in the forward pass means summing in the backward pass: if a of shape [3] was
// added to every row of b [2, 3], each element of a influenced 2 outputs, so da sums dc over
// the broadcast axis. sum_to_shape (ops/broadcast.cpp) does that for every op below.
#include "backends/backend.h"
#include "core/autograd.h"
#include "core/error.h"
#include "ops/broadcast.h"
#include "ops/ops.h"

namespace qkgrad {

namespace {

Tensor binary_forward(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b) {
  check_same_dtype_device(op, a, b);
  Tensor out = Tensor::empty(broadcast_shapes(op, a.shape(), b.shape()), a.dtype(), a.device());
  backend(a.device()).binary(kind, a, b, out);
  return out;
}

// y = f(x), dx = dy * f'(x): the backend's unary_backward kernel knows each f'.
Tensor unary(const char* op, UnaryOp kind, const Tensor& x) {
  QKGRAD_CHECK(x.defined(), op, ": the input tensor is undefined");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).unary(kind, x, y);
  if (should_record(x)) {
    record(op, {x}, {y}, {x, y}, [kind](BackwardContext& ctx) {
      const Tensor& xs = ctx.saved(0);
      const Tensor& ys = ctx.saved(1);
      const Tensor dy = ctx.grad_output();
      Tensor dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
      backend(xs.device()).unary_backward(kind, xs, ys, dy, dx, /*accumulate=*/false);
      ctx.accumulate(0, std::move(dx));
    });
  }
  return y;
}

Tensor scalar_like(double value, const Tensor& t) {
  QKGRAD_CHECK(t.defined(), "scalar arithmetic: the tensor is undefined");
  return Tensor::scalar(value, t.dtype(), t.device());
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

Tensor neg(const Tensor& x) { return unary("neg", UnaryOp::neg, x); }     // dx = -dy
Tensor exp(const Tensor& x) { return unary("exp", UnaryOp::exp, x); }     // dx = dy * y
Tensor log(const Tensor& x) { return unary("log", UnaryOp::log, x); }     // dx = dy / x
Tensor tanh(const Tensor& x) { return unary("tanh", UnaryOp::tanh, x); }  // dx = dy * (1 - y²)
Tensor relu(const Tensor& x) { return unary("relu", UnaryOp::relu, x); }  // dx = dy * [x > 0]

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace qkgrad
