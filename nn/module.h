// Module: the base of every layer. A module owns named parameters and named child modules;
// the full dotted names ("encoder.layers.0.self_attn.q_proj.weight") are the checkpoint keys.
//
// Parameters and children are ordinary members of the derived class, registered in its
// constructor; the module keeps pointers to them, so modules are neither copied nor moved.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace qkgrad {

using NamedTensor = std::pair<std::string, Tensor>;

// What a module needs to create its parameters: where random initial values come from, and
// their dtype and device.
struct InitContext {
  Generator& gen;
  DType dtype = DType::f32;
  Device device = Device::cpu;

  Tensor normal(const Shape& shape, double stddev) const;  // N(0, stddev²)
  Tensor zeros(const Shape& shape) const;
  Tensor full(const Shape& shape, double value) const;
};

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Every parameter of this module and its children, depth first in registration order.
  std::vector<NamedTensor> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t parameter_count() const;
  // The parameter with this full name; throws an Error listing close names if there is none.
  Tensor parameter(const std::string& name) const;

  // Training mode turns dropout on; eval mode off. Applies to all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }

  void zero_grad();

 protected:
  // Registers `param` (a member) under `name`; it becomes a leaf that requires grad.
  void register_parameter(const std::string& name, Tensor& param);
  // Registers `child` (a member, or owned through a unique_ptr member) under `name`.
  void register_module(const std::string& name, Module& child);

 private:
  void collect(const std::string& prefix, std::vector<NamedTensor>& out) const;

  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
};

// Eval mode for a scope: the module's mode before is restored when it ends, also by an exception.
class EvalMode {
 public:
  explicit EvalMode(Module& m) : module_(m), was_training_(m.training()) { m.eval(); }
  ~EvalMode() { module_.train(was_training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace qkgrad
