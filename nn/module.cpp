#include "nn/module.h"

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"

namespace qkgrad {

Tensor InitContext::normal(const Shape& shape, double stddev) const {
  Tensor t = Tensor::randn(shape, gen, dtype, device);
  backend(device).scale(t, stddev, t);
  return t;
}

Tensor InitContext::zeros(const Shape& shape) const { return Tensor::zeros(shape, dtype, device); }

Tensor InitContext::full(const Shape& shape, double value) const {
  return Tensor::full(shape, value, dtype, device);
}

void Module::register_parameter(const std::string& name, Tensor& param) {
  QKGRAD_CHECK(param.defined(), "Module: parameter '", name, "' is undefined");
  for (const auto& [existing, p] : params_) {
    QKGRAD_CHECK(existing != name, "Module: parameter name '", name, "' registered twice");
  }
  param.requires_grad_();
  params_.emplace_back(name, &param);
}

void Module::register_module(const std::string& name, Module& child) {
  for (const auto& [existing, c] : children_) {
    QKGRAD_CHECK(existing != name, "Module: child module name '", name, "' registered twice");
  }
  children_.emplace_back(name, &child);
}

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out) const {
  for (const auto& [name, p] : params_) out.emplace_back(prefix + name, *p);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<NamedTensor> Module::named_parameters() const {
  std::vector<NamedTensor> out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

Tensor Module::parameter(const std::string& name) const {
  for (const auto& [n, t] : named_parameters()) {
    if (n == name) return t;
  }
  fail(cat("Module: no parameter named '", name, "' (", parameter_count(), " parameters in ",
           named_parameters().size(), " tensors; see named_parameters())"));
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [name, t] : named_parameters()) t.zero_grad();
}

}  // namespace qkgrad
