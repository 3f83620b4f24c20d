// Broadcasting helpers shared by the ops (not ops themselves: they record nothing).
#pragma once

#include <string_view>

#include "core/tensor.h"

namespace qkgrad {

// The NumPy broadcast of two shapes, or an Error naming the op and both shapes.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Sums a gradient of a broadcast result back down to the shape of the input that was broadcast
// (the backward of broadcasting): leading dims are summed away, size-1 dims summed to 1.
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

// Copies x into a new tensor of the broadcast shape.
Tensor expand_to(const Tensor& x, const Shape& shape);

}  // namespace qkgrad
