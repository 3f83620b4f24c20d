#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace qkgrad {

namespace {
void check_dims(const int64_t* dims, std::size_t count) {
  QKGRAD_CHECK(count <= Shape::kMaxRank, "shape: rank ", count, " exceeds the maximum rank of ",
               Shape::kMaxRank, "; reshape to fewer dimensions");
  // Element counts and strides stay below 2^60 so that byte counts of any dtype fit in 64 bits.
  // The bound is on the product of max(size, 1): a shape with a 0 has no elements, but its
  // strides (products of the other sizes) must still be representable.
  int64_t span = 1;
  for (std::size_t i = 0; i < count; ++i) {
    QKGRAD_CHECK(dims[i] >= 0, "shape: dimension ", i, " is negative (", dims[i],
                 "); sizes must be >= 0");
    QKGRAD_CHECK(!__builtin_mul_overflow(span, std::max<int64_t>(dims[i], 1), &span) && span < (int64_t{1} << 60),
                 "shape: ", count, "-D shape with dimension ", i, " = ", dims[i],
                 " has too many elements (more than 2^60, counting zero-sized dimensions as 1)");
  }
}
}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) {
  check_dims(dims.begin(), dims.size());
  rank_ = static_cast<int>(dims.size());
  std::size_t i = 0;
  for (int64_t d : dims) dims_[i++] = d;
}

Shape::Shape(const std::vector<int64_t>& dims) {
  check_dims(dims.data(), dims.size());
  rank_ = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) dims_[i] = dims[i];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::dim(int axis) const {
  return dims_[normalize_axis("shape", axis, rank_)];
}

std::array<int64_t, Shape::kMaxRank> Shape::strides() const {
  std::array<int64_t, kMaxRank> s{};
  int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    s[i] = stride;
    stride *= dims_[i];
  }
  return s;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape.str(); }

int normalize_axis(std::string_view op, int axis, int rank) {
  const int normalized = axis < 0 ? axis + rank : axis;
  QKGRAD_CHECK(normalized >= 0 && normalized < rank, op, ": axis ", axis,
               " is out of range for a tensor of rank ", rank, " (valid: ", -rank, " to ",
               rank - 1, ")");
  return normalized;
}

}  // namespace qkgrad
