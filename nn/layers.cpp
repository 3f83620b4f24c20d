#include "nn/layers.h"

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad {

Linear::Linear(int64_t in, int64_t out, bool with_bias, double init_std, const InitContext& init)
    : weight(init.normal({out, in}, init_std)) {
  register_parameter("weight", weight);
  if (with_bias) {
    bias = init.zeros({out});
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

Embedding::Embedding(int64_t vocab, int64_t dim, bool use_fixnorm, const InitContext& init)
    : weight(init.normal({vocab, dim}, 1.0 / std::sqrt(static_cast<double>(dim)))), fixnorm(use_fixnorm) {
  register_parameter("weight", weight);
}

Tensor Embedding::embed(const Tensor& ids) const {
  const double scale = std::sqrt(static_cast<double>(weight.size(1)));
  const Tensor rows = embedding(weight, ids);  // [B, T, D]
  return (fixnorm ? l2_normalize(rows) : rows) * scale;
}

Tensor Embedding::logits(const Tensor& x) const {
  return linear(x, output_rows());  // [B, T, D] x [V, D]ᵀ
}

Tensor Embedding::output_rows() const { return fixnorm ? l2_normalize(weight) : weight; }

LayerNorm::LayerNorm(int64_t dim, double epsilon, const InitContext& init)
    : gamma(init.full({dim}, 1.0)), beta(init.zeros({dim})), eps(epsilon) {
  register_parameter("gamma", gamma);
  register_parameter("beta", beta);
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, gamma, beta, eps); }

ScaleNorm::ScaleNorm(int64_t dim, double epsilon, const InitContext& init)
    : g(init.full({}, std::sqrt(static_cast<double>(dim)))), eps(epsilon) {
  register_parameter("g", g);
}

Tensor ScaleNorm::forward(const Tensor& x) const { return scale_norm(x, g, eps); }

RMSNorm::RMSNorm(int64_t dim, double epsilon, const InitContext& init) : gamma(init.full({dim}, 1.0)), eps(epsilon) {
  register_parameter("gamma", gamma);
}

Tensor RMSNorm::forward(const Tensor& x) const { return rms_norm(x, gamma, eps); }

std::unique_ptr<NormLayer> make_norm(NormType type, int64_t dim, const InitContext& init) {
  if (type == NormType::layer_norm) return std::make_unique<LayerNorm>(dim, 1e-5, init);
  if (type == NormType::rms_norm) return std::make_unique<RMSNorm>(dim, 1e-6, init);
  return std::make_unique<ScaleNorm>(dim, 1e-5, init);
}

FeedForward::FeedForward(int64_t dim, int64_t hidden, double dropout, const InitContext& init, const std::string& act,
                         bool bias)
    : fc1(dim, hidden, bias, std::sqrt(2.0 / static_cast<double>(dim + hidden)), init),
      fc2(hidden, dim, bias, std::sqrt(2.0 / static_cast<double>(dim + hidden)), init),
      dropout_p(dropout),
      activation(act) {
  QKGRAD_CHECK(act == "relu" || act == "gelu" || act == "swiglu", "FeedForward: activation must be relu, gelu or swiglu, got '",
               act, "'");
  register_module("fc1", fc1);
  register_module("fc2", fc2);
  if (act == "swiglu") {
    gate = std::make_unique<Linear>(dim, hidden, bias, std::sqrt(2.0 / static_cast<double>(dim + hidden)), init);
    register_module("gate", *gate);
  }
}

Tensor FeedForward::forward(const Tensor& x, Generator& gen) const {
  const Tensor h = fc1.forward(x);  // [B, T, F]
  const Tensor a = activation == "gelu" ? qkgrad::gelu(h) : activation == "relu" ? relu(h) : silu(h) * gate->forward(x);
  return fc2.forward(qkgrad::dropout(a, dropout_p, gen, training()));
}

}  // namespace qkgrad
