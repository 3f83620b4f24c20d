// Shape: the sizes of a tensor's dimensions, row-major, rank 0 (a scalar) to 5.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace qkgrad {

class Shape {
 public:
  static constexpr int kMaxRank = 5;

  Shape() = default;  // rank 0: a scalar with one element
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t numel() const;
  int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  // dim(-1) is the last dimension; throws for an axis out of range.
  int64_t dim(int axis) const;

  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  // Row-major strides in elements: stride(rank-1) == 1.
  std::array<int64_t, kMaxRank> strides() const;

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }

  std::string str() const;  // "[2, 3]", "[]" for a scalar

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& out, const Shape& shape);

// Turns a possibly negative axis into 0..rank-1, or throws naming the op.
int normalize_axis(std::string_view op, int axis, int rank);

}  // namespace qkgrad
