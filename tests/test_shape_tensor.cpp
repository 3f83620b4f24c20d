// Shapes, tensor factories, element access, reshape sharing storage, conversions, printing.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

TEST_CASE("Shape: rank, numel, strides, negative axes, printing", "[shape]") {
  const Shape s{2, 3, 4};
  CHECK(s.rank() == 3);
  CHECK(s.numel() == 24);
  CHECK(s.dim(-1) == 4);
  CHECK(s.strides()[0] == 12);
  CHECK(s.strides()[2] == 1);
  CHECK(s.str() == "[2, 3, 4]");
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{}.str() == "[]");
  CHECK(Shape{0, 3}.numel() == 0);
  CHECK(Shape{2, 3} != Shape{3, 2});
}

TEST_CASE("Shape: rank above 5, negative sizes and bad axes are clear errors", "[shape][errors]") {
  CHECK_THROWS_WITH(Shape({1, 2, 3, 4, 5, 6}), Contains("rank 6 exceeds the maximum rank of 5"));
  CHECK_THROWS_WITH(Shape({2, -1}), Contains("dimension 1 is negative"));
  CHECK_THROWS_WITH(Shape({2, 3}).dim(2), Contains("axis 2 is out of range for a tensor of rank 2"));
}

TEST_CASE("Tensor factories fill the right values", "[tensor]") {
  CHECK(Tensor::zeros({2, 2}).to_vector() == std::vector<double>{0, 0, 0, 0});
  CHECK(Tensor::ones({3}, DType::f64).to_vector() == std::vector<double>{1, 1, 1});
  CHECK(Tensor::full({2}, 2.5).to_vector() == std::vector<double>{2.5, 2.5});
  CHECK(Tensor::scalar(7).rank() == 0);
  CHECK(Tensor::scalar(7).item() == 7);
  CHECK(Tensor::arange(4).to_vector() == std::vector<double>{0, 1, 2, 3});
  CHECK(Tensor::arange(1.0, 2.0, 0.25, DType::f64).to_vector() == std::vector<double>{1, 1.25, 1.5, 1.75});
  const Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.dtype() == DType::f32);
  CHECK(t.device() == Device::cpu);
  CHECK(t.at({1, 2}) == 6);
  CHECK(t.at({0, 1}) == 2);
  CHECK(t.nbytes() == 24);
}

TEST_CASE("Tensor element access checks indices, and from_vector checks sizes", "[tensor][errors]") {
  Tensor t = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH(t.at({2, 0}), Contains("index 2 is out of range for axis 0 of size 2 (shape [2, 3])"));
  CHECK_THROWS_WITH(t.at({0}), Contains("got 1 indices for a tensor of shape [2, 3]"));
  CHECK_THROWS_WITH(t.item(), Contains("6 elements"));
  CHECK_THROWS_WITH(Tensor::from_vector({1, 2, 3}, {2, 2}), Contains("3 values cannot fill shape [2, 2]"));
  CHECK_THROWS_WITH(Tensor().shape(), Contains("undefined"));
  CHECK_THROWS_WITH(t.data<double>(), Contains("the tensor holds f32"));
  t.set({1, 1}, 5);
  CHECK(t.at({1, 1}) == 5);
}

TEST_CASE("reshape shares storage; clone copies it", "[tensor]") {
  Tensor a = Tensor::arange(6).reshape({2, 3});
  Tensor b = a.reshape({3, 2});
  CHECK(b.shape() == Shape{3, 2});
  CHECK(b.raw_data() == a.raw_data());
  b.set({0, 1}, 42);
  CHECK(a.at({0, 1}) == 42);  // the same memory
  Tensor c = a.clone();
  c.set({0, 0}, -1);
  CHECK(a.at({0, 0}) == 0);
  CHECK_THROWS_WITH(a.reshape({4}), Contains("reshape: cannot reshape [2, 3] (6 elements) to [4] (4 elements)"));
}

TEST_CASE("to(dtype) converts values; to(device) to the same device is a no-op", "[tensor]") {
  const Tensor a = Tensor::from_vector({0.1, -2.5, 3}, {3}, DType::f64);
  const Tensor b = a.to(DType::f32);
  CHECK(b.dtype() == DType::f32);
  CHECK(b.at({0}) == static_cast<double>(0.1f));
  CHECK(b.to(DType::f64).at({1}) == -2.5);
  CHECK(a.to(Device::cpu).same(a));
}

TEST_CASE("to(cuda) without a CUDA build or GPU explains itself", "[tensor][errors]") {
  if (cuda_available()) return;  // covered by test_cuda.cpp on GPU machines
  CHECK_THROWS_WITH(Tensor::zeros({2}).to(Device::cuda), Contains("cuda"));
}

TEST_CASE("printing shows values, shape, dtype and device", "[tensor]") {
  const Tensor t = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  CHECK(t.str() == "tensor([[1, 2],\n        [3, 4]], shape=[2, 2], f32, cpu)");
  CHECK(Tensor::scalar(1.5, DType::f64).str() == "tensor(1.5, shape=[], f64, cpu)");
  CHECK_THAT(Tensor::arange(20).str(), Contains("[0, 1, 2, ..., 17, 18, 19]"));
  Tensor p = Tensor::zeros({1});
  p.requires_grad_();
  CHECK_THAT(p.str(), Contains("requires_grad"));
}

TEST_CASE("in-place writes to tensors that require grad are refused in grad mode", "[tensor][errors]") {
  Tensor w = Tensor::zeros({2});
  w.requires_grad_();
  CHECK_THROWS_WITH(w.fill_(1), Contains("fill_: in-place write to a tensor that requires grad ([2] f32 cpu)"));
  CHECK_THROWS_WITH(w.set({0}, 1), Contains("NoGradGuard"));
}

TEST_CASE("shapes with more than 2^60 elements are refused before any allocation", "[shape][errors]") {
  CHECK_THROWS_WITH(Shape({int64_t{1} << 61}), Contains("too many elements"));
  CHECK_THROWS_WITH(Shape({int64_t{1} << 32, int64_t{1} << 32}), Contains("too many elements"));
  // No elements, but strides of 2^80 (found by fuzz-safetensors): refused too.
  CHECK_THROWS_WITH(Shape({0, int64_t{1} << 40, int64_t{1} << 40}), Contains("too many elements"));
  CHECK(Shape({0, int64_t{1} << 20, int64_t{1} << 20}).numel() == 0);
  CHECK_THROWS_WITH(Tensor::arange(0.0, 1e308, 1e-10), Contains("arange"));
}
