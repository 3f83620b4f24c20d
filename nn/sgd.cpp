#include "nn/sgd.h"

#include <cmath>

#include "backends/backend.h"
#include "core/autograd.h"
#include "core/error.h"

namespace qkgrad {

namespace {
void check_hyperparameters(double lr, double momentum, double weight_decay) {
  QKGRAD_CHECK(std::isfinite(lr) && lr >= 0, "SGD: lr must be finite and >= 0, got ", lr);
  QKGRAD_CHECK(momentum >= 0 && momentum < 1, "SGD: momentum must be in [0, 1), got ", momentum);
  QKGRAD_CHECK(std::isfinite(weight_decay) && weight_decay >= 0,
               "SGD: weight_decay must be finite and >= 0, got ", weight_decay);
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : params_(std::move(params)), velocity_(params_.size()), lr_(lr), momentum_(momentum),
      weight_decay_(weight_decay) {
  check_hyperparameters(lr, momentum, weight_decay);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    QKGRAD_CHECK(params_[i].defined() && params_[i].requires_grad() && params_[i].is_leaf(),
                 "SGD: parameter ", i, " (", describe(params_[i]),
                 ") must be a leaf tensor that requires grad");
  }
}

void SGD::set_lr(double lr) {
  check_hyperparameters(lr, momentum_, weight_decay_);
  lr_ = lr;
}

void SGD::step() {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (momentum_ != 0.0 && !velocity_[i].defined()) {
      velocity_[i] = Tensor::zeros(p.shape(), p.dtype(), p.device());
    }
    Tensor& v = momentum_ != 0.0 ? velocity_[i] : p;  // unused without momentum
    backend(p.device()).sgd_update(p, g, v, lr_, momentum_, weight_decay_);
    p.impl()->storage->bump_version();
  }
}

void SGD::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

}  // namespace qkgrad
