#include "nn/optim.h"

#include <cmath>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad {

// ---- Optimizer ----

Optimizer::Optimizer(std::vector<NamedTensor> params, double lr) : params_(std::move(params)) {
  set_lr(lr);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    QKGRAD_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), "optimizer: parameter '", name,
                 "' (", describe(p), ") must be a leaf tensor that requires grad");
    for (std::size_t j = 0; j < i; ++j) {
      QKGRAD_CHECK(params_[j].first != name, "optimizer: two parameters are named '", name, "'");
    }
  }
}

void Optimizer::set_lr(double lr) {
  QKGRAD_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: the learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::step(double grad_scale) {
  NoGradGuard no_grad;
  ++steps_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    update(i, p, g, grad_scale);
    p.mark_written();
  }
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

Tensor& Optimizer::state(std::vector<Tensor>& slots, std::size_t index) {
  if (!slots[index].defined()) {
    const Tensor& p = params_[index].second;
    slots[index] = Tensor::zeros(p.shape(), p.dtype(), p.device());
  }
  return slots[index];
}

void Optimizer::load_state(const std::vector<NamedTensor>& tensors, int64_t steps) {
  QKGRAD_CHECK(steps >= 0, "optimizer: cannot resume at step ", steps);
  std::vector<NamedTensor> mine = state_tensors();
  QKGRAD_CHECK(tensors.size() == mine.size(), "optimizer: the checkpoint has ", tensors.size(),
               " state tensors but this optimizer has ", mine.size(), " (was it saved by another optimizer or model?)");
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    QKGRAD_CHECK(tensors[i].first == mine[i].first && tensors[i].second.shape() == mine[i].second.shape(),
                 "optimizer: state tensor ", i, " is '", tensors[i].first, "' ", tensors[i].second.shape(),
                 " in the checkpoint but '", mine[i].first, "' ", mine[i].second.shape(), " here");
    mine[i].second.copy_(tensors[i].second);  // e.g. from the host (a checkpoint) to the GPU
  }
  steps_ = steps;
}

// ---- SGD ----

SGD::SGD(std::vector<NamedTensor> params, double lr, double momentum, double weight_decay)
    : Optimizer(std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay) {
  QKGRAD_CHECK(momentum >= 0 && momentum < 1, "SGD: momentum must be in [0, 1), got ", momentum);
  QKGRAD_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "SGD: weight_decay must be >= 0, got ", weight_decay);
  velocity_.resize(params_.size());
  // Allocate the state now, so that state_tensors() is complete before the first step.
  if (momentum_ != 0) for (std::size_t i = 0; i < params_.size(); ++i) state(velocity_, i);
}

namespace {
std::vector<NamedTensor> name_in_order(const std::vector<Tensor>& params) {
  std::vector<NamedTensor> named;
  for (std::size_t i = 0; i < params.size(); ++i) named.emplace_back("param." + std::to_string(i), params[i]);
  return named;
}
}  // namespace

SGD::SGD(const std::vector<Tensor>& params, double lr, double momentum, double weight_decay)
    : SGD(name_in_order(params), lr, momentum, weight_decay) {}

void SGD::update(std::size_t index, Tensor& param, const Tensor& grad, double grad_scale) {
  Tensor& v = momentum_ != 0 ? state(velocity_, index) : param;  // unused without momentum
  backend(param.device()).sgd_update(param, grad, v, SgdStep{lr_, momentum_, weight_decay_, grad_scale});
}

std::vector<NamedTensor> SGD::state_tensors() const {
  std::vector<NamedTensor> out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (velocity_[i].defined()) out.emplace_back("velocity." + params_[i].first, velocity_[i]);
  }
  return out;
}

// ---- Adam / AdamW ----

Adam::Adam(std::vector<NamedTensor> params, const AdamOptions& o) : Optimizer(std::move(params), o.lr), options_(o) {
  QKGRAD_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "Adam: betas must be in [0, 1), got ",
               o.beta1, " and ", o.beta2);
  QKGRAD_CHECK(o.eps > 0, "Adam: eps must be > 0, got ", o.eps);
  QKGRAD_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "Adam: weight_decay must be >= 0, got ", o.weight_decay);
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    bool decay = o.weight_decay > 0;
    for (const std::string& pattern : o.no_decay) decay = decay && params_[i].first.find(pattern) == std::string::npos;
    decays_.push_back(decay);
    state(exp_avg_, i);
    state(exp_avg_sq_, i);
  }
}

void Adam::update(std::size_t index, Tensor& param, const Tensor& grad, double grad_scale) {
  const double t = static_cast<double>(steps_);
  AdamStep s;
  s.lr = lr_;
  s.beta1 = options_.beta1;
  s.beta2 = options_.beta2;
  s.eps = options_.eps;
  s.weight_decay = decays_[index] ? options_.weight_decay : 0.0;
  s.decoupled = options_.decoupled;
  s.bias1 = 1 - std::pow(options_.beta1, t);
  s.bias2 = 1 - std::pow(options_.beta2, t);
  s.grad_scale = grad_scale;
  backend(param.device()).adam_update(param, grad, state(exp_avg_, index), state(exp_avg_sq_, index), s);
}

std::vector<NamedTensor> Adam::state_tensors() const {
  std::vector<NamedTensor> out;
  for (std::size_t i = 0; i < params_.size(); ++i) out.emplace_back("exp_avg." + params_[i].first, exp_avg_[i]);
  for (std::size_t i = 0; i < params_.size(); ++i) out.emplace_back("exp_avg_sq." + params_[i].first, exp_avg_sq_[i]);
  return out;
}

// ---- clipping ----

double grad_norm(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return std::sqrt(sum_of_squares(grads));  // float64, a fixed order (ops/ops.h)
}

double clip_factor(double norm, double max_norm) {
  QKGRAD_CHECK(max_norm > 0, "gradient clipping: max_norm must be > 0, got ", max_norm);
  return std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  const double norm = grad_norm(params);
  const double scale = clip_factor(norm, max_norm);
  if (scale == 1.0) return norm;
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    backend(g.device()).scale(g, scale, g);
    g.mark_written();
  }
  return norm;
}

}  // namespace qkgrad
