// Dropout and word dropout, both drawing from the counter-based Philox stream: the mask is a
// pure function of (seed, stream, position), so it is reproducible for a seed and step and the
// same on every device. Dropout keeps its mask for the backward as bits (1/32 of the
// activation's float32 memory), so the backward is one pass that reads no generator.
#include <cmath>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {
RandomStream reserve_stream(Generator& gen, int64_t n) {
  // One 32-bit word per element, four per Philox block.
  return RandomStream{gen.seed(), gen.stream(), gen.reserve_blocks(static_cast<uint64_t>((n + 3) / 4))};
}
}  // namespace

// y = m ⊙ x / (1 − p), m[i] ~ Bernoulli(1 − p) from the stream     x̄ = m ⊙ ȳ / (1 − p)
Tensor dropout(const Tensor& x, double p, Generator& gen, bool training) {
  check_floating("dropout", x);
  QKGRAD_CHECK(p >= 0 && p < 1, "dropout: p must be in [0, 1), got ", p);
  if (!training || p == 0) return x;
  const RandomStream rs = reserve_stream(gen, x.numel());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty({dropout_mask_size(x.numel())}, DType::i64, x.device());  // m, as bits
  backend(x.device()).dropout(x, p, rs, y, mask);
  if (should_record(x)) {
    record("dropout", {x}, {y}, {mask}, [p](BackwardContext& ctx) {
      const Tensor dy = ctx.grad_output();
      Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
      backend(dy.device()).dropout_backward(dy, ctx.saved(0), p, dx);
      ctx.accumulate(0, std::move(dx));
    });
  }
  return y;
}

// Each id becomes `replacement` with probability p (no gradient: ids are integers).
Tensor word_dropout(const Tensor& ids, double p, int64_t replacement, Generator& gen, bool training) {
  check_index_tensor("word_dropout", ids, "ids");
  QKGRAD_CHECK(p >= 0 && p <= 1, "word_dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0) return ids;
  Tensor out = Tensor::empty(ids.shape(), DType::i64, ids.device());
  backend(ids.device()).word_dropout(ids, p, replacement, reserve_stream(gen, ids.numel()), out);
  return out;
}

// PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(t / 10000^(2i/D))   (no gradient)
Tensor sinusoidal_positions(int64_t length, int64_t dim, DType dtype, Device device) {
  QKGRAD_CHECK(length >= 0 && dim > 0, "sinusoidal_positions: need length >= 0 and dim > 0, got ",
               length, " and ", dim);
  QKGRAD_CHECK(is_floating(dtype), "sinusoidal_positions: dtype must be f32 or f64");
  std::vector<double> table(length * dim);
  for (int64_t t = 0; t < length; ++t) {
    for (int64_t j = 0; j < dim; ++j) {
      const double rate = std::pow(10000.0, -static_cast<double>(j - j % 2) / static_cast<double>(dim));
      table[t * dim + j] = j % 2 == 0 ? std::sin(t * rate) : std::cos(t * rate);
    }
  }
  return Tensor::from_vector(table, {length, dim}, dtype, device);
}

}  // namespace qkgrad
