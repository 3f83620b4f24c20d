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

// What the derivative of a unary op reads: its input x, its output y, or neither.
enum class Reads { nothing, x, y };

// y = f(x) and dx = dy · f'(x); the backend's unary_backward kernel knows each f'. Only the
// tensor f' reads is saved for backward.
Tensor unary(const char* op, UnaryOp kind, const Tensor& x, Reads reads, UnaryParams p = {}) {
  check_floating(op, x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).unary(kind, p, x, y);
  if (should_record(x)) {
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

Tensor neg(const Tensor& x) { return unary("neg", UnaryOp::neg, x, Reads::nothing); }  // dx = -dy
Tensor exp(const Tensor& x) { return unary("exp", UnaryOp::exp, x, Reads::y); }         // dx = dy·y
Tensor log(const Tensor& x) { return unary("log", UnaryOp::log, x, Reads::x); }         // dx = dy/x
Tensor tanh(const Tensor& x) { return unary("tanh", UnaryOp::tanh, x, Reads::y); }      // dx = dy·(1 - y²)
Tensor relu(const Tensor& x) { return unary("relu", UnaryOp::relu, x, Reads::x); }      // dx = dy·[x > 0]
Tensor sqrt(const Tensor& x) { return unary("sqrt", UnaryOp::sqrt, x, Reads::y); }      // dx = dy/(2y)
Tensor rsqrt(const Tensor& x) { return unary("rsqrt", UnaryOp::rsqrt, x, Reads::y); }   // dx = -dy·y³/2
Tensor sigmoid(const Tensor& x) { return unary("sigmoid", UnaryOp::sigmoid, x, Reads::y); }  // dx = dy·y(1-y)
Tensor gelu(const Tensor& x) { return unary("gelu", UnaryOp::gelu, x, Reads::x); }      // dx = dy·gelu'(x)
Tensor square(const Tensor& x) { return unary("square", UnaryOp::square, x, Reads::x); }  // dx = 2x·dy

// y = x^p            dx = p·x^(p-1)·dy
Tensor pow(const Tensor& x, double exponent) {
  QKGRAD_CHECK(std::isfinite(exponent), "pow: the exponent must be finite, got ", exponent);
  return unary("pow", UnaryOp::pow, x, Reads::x, {exponent, 0});
}

// y = min(max(x, low), high)      dx = dy where low <= x <= high, else 0
Tensor clamp(const Tensor& x, double low, double high) {
  QKGRAD_CHECK(!(low > high), "clamp: low (", low, ") must be <= high (", high, ")");
  return unary("clamp", UnaryOp::clamp, x, Reads::x, {low, high});
}

// y = x + s          dx = dy
Tensor add_scalar(const Tensor& x, double s) { return unary("add_scalar", UnaryOp::add_scalar, x, Reads::nothing, {s, 0}); }
// y = s·x            dx = s·dy
Tensor mul_scalar(const Tensor& x, double s) { return unary("mul_scalar", UnaryOp::mul_scalar, x, Reads::nothing, {s, 0}); }

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
