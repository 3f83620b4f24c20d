// Printing: tensor([[1, 2], [3, 4]], shape=[2, 2], f32, cpu). Dimensions longer than 6 show
// their first and last 3 entries around "...".
#include <sstream>

#include "core/error.h"
#include "core/tensor.h"

namespace qkgrad {

namespace {

constexpr int64_t kEdge = 3;

void print_dim(std::ostream& out, const std::vector<double>& values, const Shape& shape, int axis,
               int64_t offset, int indent) {
  if (shape.rank() == 0) {
    out << values[0];
    return;
  }
  const int64_t n = shape[axis];
  int64_t stride = 1;
  for (int a = axis + 1; a < shape.rank(); ++a) stride *= shape[a];
  out << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * kEdge && i == kEdge) {
      out << "...";
      i = n - kEdge - 1;
      out << (axis + 1 == shape.rank() ? ", " : ",\n" + std::string(indent + 1, ' '));
      continue;
    }
    if (axis + 1 == shape.rank()) {
      out << values[offset + i];
    } else {
      print_dim(out, values, shape, axis + 1, offset + i * stride, indent + 1);
    }
    if (i + 1 < n) {
      out << (axis + 1 == shape.rank() ? ", " : ",\n" + std::string(indent + 1, ' '));
    }
  }
  out << ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream out;
  out.precision(6);
  out << "tensor(";
  print_dim(out, to_vector(), shape(), 0, 0, 7);
  out << ", shape=" << shape() << ", " << dtype_name(dtype()) << ", " << device_name(device());
  if (requires_grad()) out << ", requires_grad";
  out << ')';
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace qkgrad
