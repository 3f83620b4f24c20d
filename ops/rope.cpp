// Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer", arXiv 2104.09864), in the
// half-split form of GPT-NeoX and Llama: each head's d = 2m dims are m pairs (i, i + m), and
// pair i of the token at position p turns by the angle p·θᵢ, θᵢ = base^(−2i/d):
//
//   y[i]     = x[i]·cos(pθᵢ) − x[i+m]·sin(pθᵢ)
//   y[i + m] = x[i+m]·cos(pθᵢ) + x[i]·sin(pθᵢ)
//
// The Jacobian of a rotation is the rotation, so the backward is the transposed rotation, the
// turn by −pθᵢ (docs/autodiff.md, "Rotary positions"):
//
//   x̄[i] = ȳ[i]·cos(pθᵢ) + ȳ[i+m]·sin(pθᵢ),   x̄[i + m] = ȳ[i+m]·cos(pθᵢ) − ȳ[i]·sin(pθᵢ)
//
// Both are the one function `rotate` below: one pass of the backend's rope kernel over x with
// the tables of cos(pθᵢ) and ±sin(pθᵢ) (the element formula is core/row_functions.h's, the same
// on the CPU and the GPU); the op records one node whose backward is `rotate` by −pθ.
// Rotating q and k this way makes q·k depend on their positions only through p_q − p_k.
#include <cmath>
#include <deque>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

// cos(pθᵢ) and sign·sin(pθᵢ) for p = first .. first + T − 1, as [T, m] (the same for every batch
// row and head). The angles are computed in double on the host.
std::pair<Tensor, Tensor> rotation_tables(int64_t T, int64_t m, int64_t first, double base, double sign, DType dtype,
                                          Device device) {
  std::vector<double> c(T * m), s(T * m);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(2 * m));
      const double angle = static_cast<double>(first + t) * theta;
      c[t * m + i] = std::cos(angle);
      s[t * m + i] = sign * std::sin(angle);
    }
  }
  return {Tensor::from_vector(c, {T, m}, dtype, device), Tensor::from_vector(s, {T, m}, dtype, device)};
}

// The tables of the last few requests, by their arguments: a training step asks for the same
// ones in every layer, forward and backward, for q and k. Never freed (a leak on purpose: no
// tensor may outlive its device's backend at exit).
std::pair<Tensor, Tensor> cached_rotation_tables(int64_t T, int64_t m, int64_t first, double base, double sign, DType dtype,
                                                 Device device) {
  using Key = std::tuple<int64_t, int64_t, int64_t, double, double, DType, Device>;
  static auto* cache = new std::deque<std::pair<Key, std::pair<Tensor, Tensor>>>();
  static auto* mutex = new std::mutex();
  const Key key{T, m, first, base, sign, dtype, device};
  const std::lock_guard<std::mutex> lock(*mutex);
  for (const auto& [k, tables] : *cache) {
    if (k == key) return tables;
  }
  if (cache->size() >= 16) cache->pop_front();
  cache->emplace_back(key, rotation_tables(T, m, first, base, sign, dtype, device));
  return cache->back().second;
}

// x [B, T, H·d] turned by sign·pθ (sign −1: the inverse rotation, the backward).
Tensor rotate(const Tensor& x, int64_t heads, int64_t first, double base, double sign) {
  const int64_t T = x.shape()[1], m = x.shape()[2] / heads / 2;
  const auto [cos, sin] = cached_rotation_tables(T, m, first, base, sign, x.dtype(), x.device());  // [T, m]
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());                                    // [B, T, H·d]
  backend(x.device()).rope(x, cos, sin, heads, y);
  return y;
}

}  // namespace

Tensor rope(const Tensor& x, int64_t heads, int64_t first_position, double base) {
  check_floating("rope", x);
  QKGRAD_CHECK(x.rank() == 3, "rope: x must be [B, T, H·d], got ", x.shape().str());
  QKGRAD_CHECK(heads >= 1 && x.shape()[2] % heads == 0, "rope: ", heads, " heads do not divide the width ", x.shape()[2],
               " of x ", x.shape().str());
  QKGRAD_CHECK((x.shape()[2] / heads) % 2 == 0, "rope: the head size ", x.shape()[2] / heads,
               " must be even (its dims turn in pairs)");
  QKGRAD_CHECK(first_position >= 0, "rope: first_position must be >= 0, got ", first_position);
  QKGRAD_CHECK(base > 1, "rope: base must be > 1, got ", base);
  const Tensor y = rotate(x, heads, first_position, base, 1.0);
  if (should_record(x)) {
    record("rope", {x}, {y}, {}, [heads, first_position, base](BackwardContext& ctx) {
      ctx.accumulate(0, rotate(ctx.grad_output(), heads, first_position, base, -1.0));
    });
  }
  return y;
}

}  // namespace qkgrad
