#include "translation/averaging.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/autograd.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "nn/transformer.h"

namespace qkgrad::translation {

namespace fs = std::filesystem;

void average_checkpoints(const std::vector<std::string>& inputs, const std::string& out) {
  QKGRAD_CHECK(!inputs.empty(), "average: no checkpoints to average");
  for (const std::string& in : inputs) {
    QKGRAD_CHECK(checkpoint_exists(in), "average: ", in, " is not a checkpoint directory");
    std::error_code ec;
    QKGRAD_CHECK(!(fs::exists(out) && fs::equivalent(in, out, ec)), "average: --out ", out,
                 " is one of the inputs; write the average to a new directory");
  }
  NoGradGuard no_grad;
  // The first input fixes the architecture; every other one must load into the same model.
  const TransformerConfig config = load_checkpoint_config(inputs.front());
  Seq2SeqTransformer mean_model(config, Device::cpu), input(config, Device::cpu);
  const std::vector<NamedTensor> params = mean_model.named_parameters();
  std::vector<std::vector<double>> sums(params.size());
  for (const std::string& dir : inputs) {
    load_model_weights(dir, input);  // names, shapes and dtypes checked against the model
    const std::vector<NamedTensor> values = input.named_parameters();
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::vector<double> v = Tensor(values[i].second).to_vector();
      if (sums[i].empty()) sums[i].assign(v.size(), 0.0);
      for (std::size_t k = 0; k < v.size(); ++k) sums[i][k] += v[k];
    }
  }
  const double n = static_cast<double>(inputs.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    for (double& x : sums[i]) x /= n;
    Tensor p = params[i].second;
    p.copy_(Tensor::from_vector(sums[i], p.shape(), p.dtype()));
  }
  save_checkpoint(out, mean_model, nullptr);
}

}  // namespace qkgrad::translation
