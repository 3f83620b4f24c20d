#include "core/tensor.h"

#include <cmath>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"

namespace qkgrad {

namespace {

std::shared_ptr<TensorImpl> new_impl(const Shape& shape, DType dtype, Device device) {
  // Shape caps numel at 2^60, so the byte count below cannot overflow.
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  impl->storage = std::make_shared<Storage>(device, bytes);
  return impl;
}

// Refuses in-place writes that would silently break gradients.
void check_inplace(const Tensor& t, const char* op) {
  QKGRAD_CHECK(!(grad_enabled() && t.requires_grad()), op,
               ": in-place write to a tensor that requires grad (", describe(t),
               ") while grad mode is on would corrupt the gradients; do it inside a "
               "NoGradGuard (as optimizers do)");
}

int64_t flat_index(const Tensor& t, std::initializer_list<int64_t> index, const char* op) {
  const Shape& s = t.shape();
  QKGRAD_CHECK(static_cast<int>(index.size()) == s.rank(), op, ": got ", index.size(),
               " indices for a tensor of shape ", s, " (rank ", s.rank(), ")");
  int64_t flat = 0;
  int axis = 0;
  for (int64_t i : index) {
    QKGRAD_CHECK(i >= 0 && i < s[axis], op, ": index ", i, " is out of range for axis ", axis,
                 " of size ", s[axis], " (shape ", s, ")");
    flat = flat * s[axis] + i;
    ++axis;
  }
  return flat;
}

}  // namespace

// ---- factories ----

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return Tensor(new_impl(shape, dtype, device));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  backend(device).fill(t, value);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return full(Shape{}, value, dtype, device);
}

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  QKGRAD_CHECK(n >= 0, "arange: n must be >= 0, got ", n);
  return arange(0.0, static_cast<double>(n), 1.0, dtype, device);
}

Tensor Tensor::arange(double start, double end, double step, DType dtype, Device device) {
  QKGRAD_CHECK(step != 0.0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end),
               "arange: start, end and step must be finite and step non-zero (got ", start, ", ",
               end, ", ", step, ")");
  const double count = std::ceil((end - start) / step);
  QKGRAD_CHECK(count < 1e12, "arange: ", start, " to ", end, " in steps of ", step,
               " would have ", count, " elements");
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = start + step * static_cast<double>(i);
  return from_vector(values, Shape{n}, dtype, device);
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype,
                           Device device) {
  QKGRAD_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ",
               values.size(), " values cannot fill shape ", shape, " (", shape.numel(),
               " elements)");
  Tensor host = empty(shape, DType::f64, Device::cpu);
  std::copy(values.begin(), values.end(), host.data<double>());
  if (dtype == DType::f64 && device == Device::cpu) return host;
  Tensor out = empty(shape, dtype, device);
  out.copy_(host);
  return out;
}

Tensor Tensor::from_ids(const std::vector<int64_t>& ids, const Shape& shape, Device device) {
  QKGRAD_CHECK(static_cast<int64_t>(ids.size()) == shape.numel(), "from_ids: ", ids.size(),
               " ids cannot fill shape ", shape, " (", shape.numel(), " elements)");
  Tensor host = empty(shape, DType::i64, Device::cpu);
  std::copy(ids.begin(), ids.end(), host.data<int64_t>());
  return device == Device::cpu ? host : host.to(device);
}

std::vector<int64_t> Tensor::to_ids() const {
  QKGRAD_CHECK(dtype() == DType::i64, "to_ids: the tensor is ", describe(*this), ", not i64");
  const Tensor host = to(Device::cpu);
  const int64_t* p = host.data<int64_t>();
  return std::vector<int64_t>(p, p + numel());
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
  QKGRAD_CHECK(is_floating(dtype), "randn: dtype must be f32 or f64, not i64");
  Tensor t = empty(shape, dtype, device);
  const RandomStream rs{gen.seed(), gen.stream(),
                        gen.reserve_blocks(random_blocks_needed(dtype, shape.numel()))};
  backend(device).fill_normal(t, 0.0, 1.0, rs);
  return t;
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype,
                       Device device) {
  QKGRAD_CHECK(low <= high, "uniform: low (", low, ") must be <= high (", high, ")");
  QKGRAD_CHECK(is_floating(dtype), "uniform: dtype must be f32 or f64, not i64");
  Tensor t = empty(shape, dtype, device);
  const RandomStream rs{gen.seed(), gen.stream(),
                        gen.reserve_blocks(random_blocks_needed(dtype, shape.numel()))};
  backend(device).fill_uniform(t, low, high, rs);
  return t;
}

// ---- properties ----

TensorImpl& Tensor::checked_impl(const char* what) const {
  QKGRAD_CHECK(impl_ != nullptr, what,
               ": the tensor is undefined (default-constructed, or the grad() of a tensor that "
               "no backward pass has reached)");
  return *impl_;
}

const Shape& Tensor::shape() const { return checked_impl("shape").shape; }
DType Tensor::dtype() const { return checked_impl("dtype").dtype; }
Device Tensor::device() const { return checked_impl("device").device(); }

void* Tensor::raw_data() const {
  const TensorImpl& impl = checked_impl("data");
  return static_cast<char*>(impl.storage->data()) +
         impl.offset * static_cast<int64_t>(dtype_size(impl.dtype));
}

template <typename T>
T* Tensor::data() const {
  QKGRAD_CHECK(dtype() == dtype_of<T>(), "data<", dtype_name(dtype_of<T>()),
               ">(): the tensor holds ", dtype_name(dtype()), " (", describe(*this), ")");
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int64_t* Tensor::data<int64_t>() const;
template bfloat16* Tensor::data<bfloat16>() const;

uint64_t Tensor::version() const { return checked_impl("version").storage->version(); }

void Tensor::mark_written() const { checked_impl("mark_written").storage->bump_version(); }

// ---- element access ----

namespace {
double read_element(const Tensor& t, int64_t flat) {
  const std::size_t size = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data()) + flat * static_cast<int64_t>(size);
  if (t.dtype() == DType::f32) {
    float v;
    backend(t.device()).copy_to_host(&v, src, sizeof v);
    return v;
  }
  if (t.dtype() == DType::i64) {
    int64_t v;
    backend(t.device()).copy_to_host(&v, src, sizeof v);
    return static_cast<double>(v);
  }
  if (t.dtype() == DType::bf16) {
    bfloat16 v;
    backend(t.device()).copy_to_host(&v, src, sizeof v);
    return static_cast<double>(v);
  }
  double v;
  backend(t.device()).copy_to_host(&v, src, sizeof v);
  return v;
}
}  // namespace

double Tensor::item() const {
  QKGRAD_CHECK(numel() == 1, "item: the tensor has ", numel(),
               " elements (shape ", shape(), "); item() needs exactly one");
  return read_element(*this, 0);
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  return read_element(*this, flat_index(*this, index, "at"));
}

void Tensor::set(std::initializer_list<int64_t> index, double value) {
  check_inplace(*this, "set");
  const int64_t flat = flat_index(*this, index, "set");
  char* dst = static_cast<char*>(raw_data()) + flat * static_cast<int64_t>(dtype_size(dtype()));
  if (dtype() == DType::f32) {
    const float v = static_cast<float>(value);
    backend(device()).copy_from_host(dst, &v, sizeof v);
  } else if (dtype() == DType::i64) {
    const int64_t v = static_cast<int64_t>(value);
    backend(device()).copy_from_host(dst, &v, sizeof v);
  } else if (dtype() == DType::bf16) {
    const bfloat16 v(value);
    backend(device()).copy_from_host(dst, &v, sizeof v);
  } else {
    backend(device()).copy_from_host(dst, &value, sizeof value);
  }
  mark_written();
}

std::vector<double> Tensor::to_vector() const {
  Tensor host = Tensor::empty(shape(), DType::f64, Device::cpu);
  host.copy_(*this);
  const double* p = host.data<double>();
  return std::vector<double>(p, p + numel());
}

// ---- copies ----

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  backend(device()).copy(*this, out);
  return out;
}

Tensor Tensor::detach() const {
  const TensorImpl& src = checked_impl("detach");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = src.shape;
  impl->dtype = src.dtype;
  impl->storage = src.storage;
  impl->offset = src.offset;
  return Tensor(std::move(impl));
}

Tensor Tensor::to(Device target) const {
  if (device() == target) return *this;
  QKGRAD_CHECK(!(grad_enabled() && requires_grad()), "to(", device_name(target),
               "): moving a tensor that requires grad (", describe(*this),
               ") between devices is not differentiable yet; move leaves before setting "
               "requires_grad, or use NoGradGuard");
  Tensor out = empty(shape(), dtype(), target);
  if (device() == Device::cpu) {
    backend(target).copy_from_host(out.raw_data(), raw_data(), nbytes());
  } else {
    backend(device()).copy_to_host(out.raw_data(), raw_data(), nbytes());  // target is cpu
  }
  return out;
}

Tensor& Tensor::fill_(double value) {
  check_inplace(*this, "fill_");
  backend(device()).fill(*this, value);
  mark_written();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  QKGRAD_CHECK(src.shape() == shape(), "copy_: source shape ", src.shape(),
               " differs from destination shape ", shape());
  if (src.device() == device()) {
    backend(device()).copy(src, *this);
  } else {
    // Convert the dtype on the source device, then move the bytes.
    Tensor staged = src;
    if (src.dtype() != dtype()) {
      staged = empty(src.shape(), dtype(), src.device());
      backend(src.device()).copy(src, staged);
    }
    if (src.device() == Device::cpu) {
      backend(device()).copy_from_host(raw_data(), staged.raw_data(), nbytes());
    } else {
      backend(src.device()).copy_to_host(raw_data(), staged.raw_data(), nbytes());
    }
  }
  mark_written();
  return *this;
}

// ---- autograd ----

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }

bool Tensor::is_leaf() const { return checked_impl("is_leaf").creator == nullptr; }

Tensor& Tensor::requires_grad_(bool on) {
  TensorImpl& impl = checked_impl("requires_grad_");
  QKGRAD_CHECK(impl.creator == nullptr || on, "requires_grad_(false): the tensor (",
               describe(*this), ") was produced by op '", impl.creator,
               "' on the tape; use detach() to get a copy cut off from autograd");
  QKGRAD_CHECK(!on || is_floating(impl.dtype), "requires_grad_(): ", describe(*this),
               " holds indices; only f32/f64 tensors can require grad");
  impl.requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& impl = checked_impl("grad");
  QKGRAD_CHECK(impl.requires_grad, "grad(): this tensor (", describe(*this),
               ") does not require grad and is not on the tape, so it has no gradient; call "
               "requires_grad_() on leaf tensors before the forward pass");
  QKGRAD_CHECK(impl.creator == nullptr || impl.retains_grad, "grad(): this tensor (",
               describe(*this), ") is an intermediate result of op '", impl.creator,
               "', whose gradient is freed during backward; call retain_grad() on it before "
               "backward() to keep it");
  return impl.grad ? Tensor(impl.grad) : Tensor();
}

void Tensor::zero_grad() {
  TensorImpl& impl = checked_impl("zero_grad");
  if (impl.grad) {
    Tensor grad(impl.grad);
    backend(grad.device()).fill(grad, 0.0);
    grad.mark_written();
  }
}

void Tensor::clear_grad() { checked_impl("clear_grad").grad.reset(); }

void Tensor::retain_grad() {
  TensorImpl& impl = checked_impl("retain_grad");
  QKGRAD_CHECK(impl.requires_grad, "retain_grad(): this tensor (", describe(*this),
               ") does not require grad");
  impl.retains_grad = true;
}

void Tensor::backward() const {
  QKGRAD_CHECK(numel() == 1, "backward(): the tensor has shape ", shape(),
               "; backward() without a seed gradient needs a one-element (scalar) loss. Reduce "
               "it first (sum/mean) or call backward(seed) with d(loss)/d(tensor) of shape ",
               shape());
  qkgrad::backward(*this, Tensor::ones(shape(), dtype(), device()));
}

void Tensor::backward(const Tensor& seed) const { qkgrad::backward(*this, seed); }

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  return cat(t.shape(), " ", dtype_name(t.dtype()), " ", device_name(t.device()));
}

}  // namespace qkgrad
