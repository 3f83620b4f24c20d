// Tensor: a shape, a dtype, a device and refcounted contiguous row-major storage, plus the
// autograd bookkeeping (requires_grad, grad, which tape node made it).
//
// Tensor is a cheap handle (a shared_ptr): copying a Tensor shares the same data.
// clone() copies the data; reshape() shares it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/generator.h"
#include "core/shape.h"
#include "core/storage.h"

namespace qkgrad {

struct TensorImpl {
  Shape shape;
  DType dtype = DType::f32;
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // first element within storage (non-zero only for views)

  // --- autograd (core/autograd.h) ---
  bool requires_grad = false;
  bool retains_grad = false;            // keep the gradient of an intermediate after backward
  std::shared_ptr<TensorImpl> grad;     // d(loss)/d(this); same shape, dtype and device
  const char* creator = nullptr;        // name of the op that produced it; nullptr for a leaf
  uint64_t tape_epoch = 0;              // which recording of the tape its node lives on
  std::size_t tape_index = 0;           // index of its node on that tape
  bool consumed_by_backward = false;    // backward() already ran from this tensor

  Device device() const { return storage->device(); }
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (defined() == false), like a null pointer
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu);
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu);
  // 0, 1, ..., n-1 and start, start+step, ... (< end), as a 1-D tensor.
  static Tensor arange(int64_t n, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor arange(double start, double end, double step, DType dtype = DType::f32,
                       Device device = Device::cpu);
  // Row-major values; values.size() must equal shape.numel().
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            DType dtype = DType::f32, Device device = Device::cpu);
  // An i64 tensor of indices (token ids, gather indices), and back.
  static Tensor from_ids(const std::vector<int64_t>& ids, const Shape& shape,
                         Device device = Device::cpu);
  std::vector<int64_t> to_ids() const;
  // Random tensors: the values depend only on the generator's seed, stream and offset
  // (see core/philox.h), identical on every device and thread count.
  static Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::f32,
                      Device device = Device::cpu);
  static Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
                        DType dtype = DType::f32, Device device = Device::cpu);

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int rank() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  int64_t size(int axis) const { return shape().dim(axis); }
  DType dtype() const;
  Device device() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }

  // Raw pointers to the elements (any device); typed access checks the dtype.
  void* raw_data() const;
  template <typename T> T* data() const;

  // ---- element access (for tests and small host-side work; copies from the GPU) ----
  double item() const;  // the value of a one-element tensor
  double at(std::initializer_list<int64_t> index) const;
  void set(std::initializer_list<int64_t> index, double value);
  std::vector<double> to_vector() const;

  // ---- copies and conversions ----
  Tensor clone() const;   // a new tensor with a copy of the data (not recorded on the tape)
  Tensor detach() const;  // shares the data, cut off from autograd
  Tensor to(Device device) const;
  // Differentiable ops defined in ops/ next to their backward:
  Tensor to(DType dtype) const;            // ops/convert.cpp
  Tensor reshape(const Shape& shape) const;  // ops/convert.cpp; shares storage

  // ---- in-place writes (refused on tensors that require grad while grad mode is on) ----
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // same shape and dtype; any devices
  // The one way to say that this tensor's memory was just written in place by a kernel called
  // outside an op (an optimizer update, a cache append, gradient clipping): it bumps the
  // storage's version, so that a backward which saved the old contents refuses to run on the
  // new ones. fill_, copy_ and the ops' own in-place writes call it too.
  void mark_written() const;

  // ---- autograd (core/autograd.h) ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // only on leaves
  bool is_leaf() const;                    // not produced by a recorded op
  Tensor grad() const;        // undefined until a backward pass reaches this tensor
  void zero_grad();           // sets an existing gradient to zeros in place
  void clear_grad();          // drops the gradient (the next backward allocates a fresh one)
  void retain_grad();         // keep the gradient of an intermediate tensor after backward
  void backward() const;                   // this must be a one-element tensor: seed 1
  void backward(const Tensor& seed) const; // seed: d(loss)/d(this), same shape

  uint64_t version() const;  // see Storage::version
  std::string str() const;   // values (abbreviated when large), shape, dtype, device

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  TensorImpl& checked_impl(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// Describes a tensor for error messages: "[2, 3] f32 cpu".
std::string describe(const Tensor& t);

}  // namespace qkgrad
