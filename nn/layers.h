// The basic layers: Linear, Embedding (with FixNorm), LayerNorm, ScaleNorm, FeedForward.
// Shapes: B batch, T time, D model width, V vocabulary, F feed-forward width.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace qkgrad {

// y = x Wᵀ + b        x: [..., in] -> y: [..., out];  W: [out, in], b: [out] (optional)
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias, double init_std, const InitContext& init);
  Tensor forward(const Tensor& x) const;

  Tensor weight;  // [out, in], N(0, init_std²)
  Tensor bias;    // [out], zeros; undefined without bias
};

// Token embeddings, shared by source, target and output (one joint vocabulary).
//   embed(ids):  FixNorm: √D · e / ‖e‖   (each looked-up row l2-normalised, then scaled)
//                otherwise: √D · e
//   logits(x):   x êᵀ with ê the (FixNorm: l2-normalised) rows: the tied output layer
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim, bool fixnorm, const InitContext& init);
  Tensor embed(const Tensor& ids) const;  // ids [B, T] (i64) -> [B, T, D]
  Tensor logits(const Tensor& x) const;   // [B, T, D] -> [B, T, V]
  // ê (FixNorm) or E, [V, D]: the output layer's rows. A decode takes them once, not every step.
  Tensor output_rows() const;

  Tensor weight;  // [V, D], N(0, 1/D)
  bool fixnorm;
};

class NormLayer : public Module {
 public:
  virtual Tensor forward(const Tensor& x) const = 0;  // over the last dim
};

// y = γ ⊙ (x − μ)/√(σ² + ε) + β
class LayerNorm : public NormLayer {
 public:
  LayerNorm(int64_t dim, double eps, const InitContext& init);
  Tensor forward(const Tensor& x) const override;

  Tensor gamma;  // [D], ones
  Tensor beta;   // [D], zeros
  double eps;
};

// ScaleNorm (Nguyen & Salazar 2019): y = g · x / max(‖x‖, ε), one scalar g, initialised to √D.
class ScaleNorm : public NormLayer {
 public:
  ScaleNorm(int64_t dim, double eps, const InitContext& init);
  Tensor forward(const Tensor& x) const override;

  Tensor g;  // [], √D
  double eps;
};

// y = γ ⊙ x / √(mean(x²) + ε)   (RMSNorm, Zhang & Sennrich 2019: LayerNorm without the mean and β)
class RMSNorm : public NormLayer {
 public:
  RMSNorm(int64_t dim, double eps, const InitContext& init);
  Tensor forward(const Tensor& x) const override;

  Tensor gamma;  // [D], ones
  double eps;
};

enum class NormType { layer_norm, scale_norm, rms_norm };
inline std::vector<std::string> norm_names() { return {"layer_norm", "scale_norm", "rms_norm"}; }  // in the enum's order
std::unique_ptr<NormLayer> make_norm(NormType type, int64_t dim, const InitContext& init);

// y = W₂ dropout(act(W₁ x + b₁)) + b₂      [B, T, D] -> [B, T, F] -> [B, T, D]
// act: relu (the paper's) or gelu. Weights N(0, 2/(D + F)), zero biases (the paper's
// initialisation).
class FeedForward : public Module {
 public:
  // activation: relu or gelu, fc2(drop(act(fc1 x))); or swiglu, fc2(drop(silu(fc1 x) ⊙ gate x))
  // (Shazeer 2020; Llama, Qwen, OLMo), with a third matrix `gate` [hidden, dim]. bias: whether
  // the matrices have biases.
  FeedForward(int64_t dim, int64_t hidden, double dropout, const InitContext& init, const std::string& activation = "relu",
              bool bias = true);
  Tensor forward(const Tensor& x, Generator& gen) const;

  Linear fc1, fc2;
  std::unique_ptr<Linear> gate;  // swiglu only
  double dropout_p;
  std::string activation;
};

}  // namespace qkgrad
