// A tensor seen as [outer, n, inner] around one axis: the layout every axis-wise kernel takes.
#pragma once

#include <cstdint>

#include "core/shape.h"

namespace qkgrad {

struct AxisSplit {
  int64_t outer = 1;  // product of the dims before the axis
  int64_t n = 1;      // the axis itself
  int64_t inner = 1;  // product of the dims after it
};

inline AxisSplit split_at(const Shape& s, int axis) {
  AxisSplit v;
  for (int i = 0; i < axis; ++i) v.outer *= s[i];
  for (int i = axis + 1; i < s.rank(); ++i) v.inner *= s[i];
  v.n = s[axis];
  return v;
}

}  // namespace qkgrad
