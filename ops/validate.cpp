#include "ops/validate.h"

#include "core/error.h"

namespace qkgrad {

void check_floating(std::string_view op, const Tensor& t, std::string_view name) {
  QKGRAD_CHECK(t.defined(), op, ": the ", name, " tensor is undefined");
  QKGRAD_CHECK(is_floating(t.dtype()), op, ": the ", name, " is ", describe(t),
               "; this op computes in f32 or f64 (i64 tensors hold indices; bf16 tensors hold the operands of "
               "mixed-precision matrix products: convert with .to(DType::f32))");
}

void check_same_dtype_device(std::string_view op, const Tensor& a, const Tensor& b) {
  QKGRAD_CHECK(a.defined() && b.defined(), op, ": an input tensor is undefined");
  check_floating(op, a);
  check_floating(op, b);
  QKGRAD_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", describe(a), " and ",
               describe(b), "; convert one with .to(DType::", dtype_name(a.dtype()), ")");
  QKGRAD_CHECK(a.device() == b.device(), op, ": devices differ: ", describe(a), " and ",
               describe(b), "; move one with .to(Device::", device_name(a.device()), ")");
}

void check_index_tensor(std::string_view op, const Tensor& ids, std::string_view name) {
  QKGRAD_CHECK(ids.defined(), op, ": the ", name, " tensor is undefined");
  QKGRAD_CHECK(ids.dtype() == DType::i64, op, ": ", name, " must be an i64 tensor, got ",
               describe(ids), " (make one with Tensor::from_ids)");
}

void check_ids_in_range(std::string_view op, const Tensor& ids, int64_t limit, std::string_view what,
                        std::string_view why) {
  const Tensor host = ids.to(Device::cpu);
  const int64_t* p = host.data<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    QKGRAD_CHECK(p[i] >= 0 && p[i] < limit, op, ": ", what, " ", p[i], " at flat position ", i,
                 " of ", describe(ids), " is out of range [0, ", limit, ") (", why, ")");
  }
}

}  // namespace qkgrad
