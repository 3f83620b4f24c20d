// Normalisations over the last axis, each fused into one kernel pass per direction:
// softmax, log_softmax, layer_norm, rms_norm, l2_normalize and scale_norm. Each is also tested against
// the same function composed from primitive ops (tests/test_fused_vs_composed.cpp).
#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

// The per-row statistics shape: x's shape without its last dim.
Shape row_shape(const Tensor& x) {
  return Shape(std::vector<int64_t>(x.shape().begin(), x.shape().end() - 1));
}

void check_rows(const char* op, const Tensor& x) {
  check_floating(op, x);
  QKGRAD_CHECK(x.rank() >= 1, op, ": needs at least 1 dim (it normalises the last one), got ", x.shape());
}

Tensor softmax_op(const char* op, const Tensor& x, bool log) {
  check_rows(op, x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).softmax(x, y, log);
  if (should_record(x)) {
    record(op, {x}, {y}, {y}, [log](BackwardContext& ctx) {
      const Tensor& y = ctx.saved(0);
      Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
      backend(y.device()).softmax_backward(y, ctx.grad_output(), dx, log);
      ctx.accumulate(0, std::move(dx));
    });
  }
  return y;
}

}  // namespace

// y = e^(x − m) / Σ e^(x − m), m = max x (per row)      x̄ = y ⊙ (ȳ − Σ ȳ ⊙ y)
Tensor softmax(const Tensor& x) { return softmax_op("softmax", x, false); }

// y = x − m − log Σ e^(x − m)                            x̄ = ȳ − softmax(x) · Σ ȳ
Tensor log_softmax(const Tensor& x) { return softmax_op("log_softmax", x, true); }

// x̂ = (x − μ) / √(σ² + eps), y = x̂ ⊙ γ + β  (μ, σ² per row, biased)
//   x̄ = rstd · (h − mean(h) − x̂ ⊙ mean(h ⊙ x̂)), h = ȳ ⊙ γ;  γ̄ = Σ_rows ȳ ⊙ x̂;  β̄ = Σ_rows ȳ
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  check_rows("layer_norm", x);
  check_same_dtype_device("layer_norm", x, gamma);
  check_same_dtype_device("layer_norm", x, beta);
  const int64_t d = x.size(-1);
  QKGRAD_CHECK(gamma.shape() == Shape{d} && beta.shape() == Shape{d}, "layer_norm: gamma ",
               gamma.shape(), " and beta ", beta.shape(), " must both be [", d, "] for input ", x.shape());
  QKGRAD_CHECK(eps > 0, "layer_norm: eps must be > 0, got ", eps);
  QKGRAD_CHECK(d > 0, "layer_norm: cannot normalise an empty last dim (shape ", x.shape(), ")");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean = Tensor::empty(row_shape(x), x.dtype(), x.device());
  Tensor rstd = Tensor::empty(row_shape(x), x.dtype(), x.device());
  backend(x.device()).layer_norm(x, gamma, beta, eps, y, mean, rstd);
  if (should_record(x, gamma, beta)) {
    record("layer_norm", {x, gamma, beta}, {y}, {x, gamma, mean, rstd}, [](BackwardContext& ctx) {
      const Tensor& xs = ctx.saved(0);
      const Tensor dy = ctx.grad_output();
      Tensor dx, dgamma, dbeta;
      if (ctx.needs_grad(0)) dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
      if (ctx.needs_grad(1)) dgamma = Tensor::empty(ctx.input(1).shape(), xs.dtype(), xs.device());
      if (ctx.needs_grad(2)) dbeta = Tensor::empty(ctx.input(2).shape(), xs.dtype(), xs.device());
      backend(xs.device()).layer_norm_backward(xs, ctx.saved(1), ctx.saved(2), ctx.saved(3), dy,
                                               dx.defined() ? &dx : nullptr,
                                               dgamma.defined() ? &dgamma : nullptr,
                                               dbeta.defined() ? &dbeta : nullptr);
      if (dx.defined()) ctx.accumulate(0, std::move(dx));
      if (dgamma.defined()) ctx.accumulate(1, std::move(dgamma));
      if (dbeta.defined()) ctx.accumulate(2, std::move(dbeta));
    });
  }
  return y;
}

// RMSNorm: y = x̂ ⊙ γ, x̂ = x · r, r = 1/√(mean(x²) + eps) (per row)
//   x̄ = r · (h − x̂ ⊙ mean(h ⊙ x̂)), h = ȳ ⊙ γ;  γ̄ = Σ_rows ȳ ⊙ x̂   (docs/autodiff.md)
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps) {
  check_rows("rms_norm", x);
  check_same_dtype_device("rms_norm", x, gamma);
  const int64_t d = x.size(-1);
  QKGRAD_CHECK(gamma.shape() == Shape{d}, "rms_norm: gamma ", gamma.shape(), " must be [", d, "] for input ", x.shape());
  QKGRAD_CHECK(eps > 0, "rms_norm: eps must be > 0, got ", eps);
  QKGRAD_CHECK(d > 0, "rms_norm: cannot normalise an empty last dim (shape ", x.shape(), ")");
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor rstd = Tensor::empty(row_shape(x), x.dtype(), x.device());
  backend(x.device()).rms_norm(x, gamma, eps, y, rstd);
  if (should_record(x, gamma)) {
    record("rms_norm", {x, gamma}, {y}, {x, gamma, rstd}, [](BackwardContext& ctx) {
      const Tensor& xs = ctx.saved(0);
      Tensor dx, dgamma;
      if (ctx.needs_grad(0)) dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
      if (ctx.needs_grad(1)) dgamma = Tensor::empty(ctx.input(1).shape(), xs.dtype(), xs.device());
      backend(xs.device()).rms_norm_backward(xs, ctx.saved(1), ctx.saved(2), ctx.grad_output(),
                                             dx.defined() ? &dx : nullptr, dgamma.defined() ? &dgamma : nullptr);
      if (dx.defined()) ctx.accumulate(0, std::move(dx));
      if (dgamma.defined()) ctx.accumulate(1, std::move(dgamma));
    });
  }
  return y;
}

// y = x / max(‖x‖, eps) (per row)
//   x̄ = (ȳ − y (y·ȳ)) / ‖x‖ when ‖x‖ > eps, else ȳ / eps (there y = x/eps is linear)
Tensor l2_normalize(const Tensor& x, double eps) {
  check_rows("l2_normalize", x);
  QKGRAD_CHECK(eps > 0, "l2_normalize: eps must be > 0, got ", eps);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor norm = Tensor::empty(row_shape(x), x.dtype(), x.device());
  backend(x.device()).l2_normalize(x, eps, y, norm);
  if (should_record(x)) {
    record("l2_normalize", {x}, {y}, {y, norm}, [eps](BackwardContext& ctx) {
      const Tensor& y = ctx.saved(0);
      Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
      backend(y.device()).l2_normalize_backward(y, ctx.saved(1), eps, ctx.grad_output(), dx);
      ctx.accumulate(0, std::move(dx));
    });
  }
  return y;
}

// ScaleNorm (Nguyen & Salazar 2019): y = g · x / max(‖x‖, eps), one learnable scalar g.
//   With u = x / max(‖x‖, eps):  ḡ = Σ ȳ ⊙ u;  x̄ = l2_normalize backward of g·ȳ
Tensor scale_norm(const Tensor& x, const Tensor& g, double eps) {
  check_rows("scale_norm", x);
  check_same_dtype_device("scale_norm", x, g);
  QKGRAD_CHECK(g.numel() == 1 && g.rank() <= 1, "scale_norm: g must be a scalar ([] or [1]), got ", g.shape());
  QKGRAD_CHECK(eps > 0, "scale_norm: eps must be > 0, got ", eps);
  Backend& be = backend(x.device());
  Tensor unit = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor norm = Tensor::empty(row_shape(x), x.dtype(), x.device());
  be.l2_normalize(x, eps, unit, norm);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  be.binary(BinaryOp::mul, unit, g, y);
  if (should_record(x, g)) {
    record("scale_norm", {x, g}, {y}, {unit, norm, g}, [eps](BackwardContext& ctx) {
      const Tensor& unit = ctx.saved(0);
      const Tensor& gs = ctx.saved(2);
      const Tensor dy = ctx.grad_output();
      if (ctx.needs_grad(1)) ctx.accumulate(1, reshape(sum(dy * unit), gs.shape()));
      if (ctx.needs_grad(0)) {
        const Tensor dunit = dy * gs;
        Tensor dx = Tensor::empty(unit.shape(), unit.dtype(), unit.device());
        backend(unit.device()).l2_normalize_backward(unit, ctx.saved(1), eps, dunit, dx);
        ctx.accumulate(0, std::move(dx));
      }
    });
  }
  return y;
}

}  // namespace qkgrad
