// Optimizers (SGD with momentum, Adam, AdamW), gradient clipping. Each optimizer keeps its
// state per parameter, by the parameter's name, so that it can be checkpointed and resumed
// exactly; each update is one fused backend kernel per parameter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace qkgrad {

class Optimizer {
 public:
  // The parameters (leaf tensors that require grad), with unique names.
  explicit Optimizer(std::vector<NamedTensor> params, double lr);
  virtual ~Optimizer() = default;

  // One update of every parameter that has a gradient (run under NoGradGuard), each gradient
  // multiplied by grad_scale inside the fused update: clipping (clip_factor) costs no pass of
  // its own over the gradients, and leaves them as backward wrote them.
  void step(double grad_scale = 1.0);
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return steps_; }  // updates made so far

  // The state to checkpoint: tensors named "<kind>.<parameter name>" (e.g. "exp_avg.decoder.norm.g").
  virtual std::vector<NamedTensor> state_tensors() const = 0;
  // Restores state_tensors() and the step count; names and shapes must match. The tensors may
  // be on any device: they are copied onto the parameters' device.
  void load_state(const std::vector<NamedTensor>& tensors, int64_t steps);

  const std::vector<NamedTensor>& params() const { return params_; }

 protected:
  virtual void update(std::size_t index, Tensor& param, const Tensor& grad, double grad_scale) = 0;
  // The state tensor for parameter `index` of the given kind, created as zeros on first use
  // (with the parameter's dtype, on its device).
  Tensor& state(std::vector<Tensor>& slots, std::size_t index);

  std::vector<NamedTensor> params_;
  double lr_;
  int64_t steps_ = 0;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<NamedTensor> params, double lr, double momentum = 0.0, double weight_decay = 0.0);
  // Unnamed parameters are named "param.0", "param.1", ...
  SGD(const std::vector<Tensor>& params, double lr, double momentum = 0.0, double weight_decay = 0.0);
  std::vector<NamedTensor> state_tensors() const override;

 private:
  void update(std::size_t index, Tensor& param, const Tensor& grad, double grad_scale) override;
  double momentum_, weight_decay_;
  std::vector<Tensor> velocity_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // AdamW (Loshchilov & Hutter): weight decay applied to the parameter directly, not through
  // the gradient. Off: classic L2 regularisation added to the gradient.
  bool decoupled = false;
  // Parameters whose name contains any of these substrings get no weight decay
  // (e.g. {"bias", "norm", ".g"}).
  std::vector<std::string> no_decay;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<NamedTensor> params, const AdamOptions& options);
  std::vector<NamedTensor> state_tensors() const override;
  const AdamOptions& options() const { return options_; }

 private:
  void update(std::size_t index, Tensor& param, const Tensor& grad, double grad_scale) override;
  AdamOptions options_;
  std::vector<bool> decays_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

// AdamW: Adam with decoupled weight decay.
inline AdamOptions adamw(double lr, double weight_decay, std::vector<std::string> no_decay = {}) {
  AdamOptions o;
  o.lr = lr;
  o.weight_decay = weight_decay;
  o.decoupled = true;
  o.no_decay = std::move(no_decay);
  return o;
}

// Gradient-norm clipping. ‖g‖ is the l2 norm of all the parameters' gradients together
// (float64, a fixed order); clipping multiplies every gradient by
//   clip_factor = min(1, max_norm / (‖g‖ + 1e-6)).
// A training step computes the norm, then passes the factor to Optimizer::step, which applies
// it inside its one pass over each parameter:
//   const double norm = grad_norm(params);            // the NaN guard checks it first
//   optimizer.step(clip_factor(norm, max_norm));
double grad_norm(const std::vector<Tensor>& params);
double clip_factor(double norm, double max_norm);
// Both in one call, scaling the gradients in place (PyTorch's clip_grad_norm_), for a loop that
// reads them after: returns ‖g‖. A non-finite norm is returned as is and nothing is scaled: the
// caller decides what to do (see the NaN guard).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace qkgrad
