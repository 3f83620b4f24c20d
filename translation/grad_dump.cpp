#include "translation/grad_dump.h"

#include <cstdio>
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/ops.h"

namespace qkgrad::translation {

namespace {

// Puts the model back into its previous training mode however the function is left.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Seq2SeqTransformer& model) : model_(model), was_training_(model.training()) { model_.eval(); }
  ~EvalModeGuard() { model_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Seq2SeqTransformer& model_;
  bool was_training_;
};

void check_ids(const char* name, const Tensor& ids, int64_t batch) {
  QKGRAD_CHECK(ids.defined() && ids.dtype() == DType::i64 && ids.rank() == 2,
               "write_gradient_dump: ", name, " must be [B, T] token ids (i64), got ",
               ids.defined() ? describe(ids) : std::string("an undefined tensor"));
  QKGRAD_CHECK(batch < 0 || ids.size(0) == batch, "write_gradient_dump: ", name, " ", ids.shape(),
               " has a batch size other than src's (", batch, ")");
}

void check_lengths(const char* name, const std::vector<int64_t>& lengths, const Tensor& ids) {
  QKGRAD_CHECK(static_cast<int64_t>(lengths.size()) == ids.size(0), "write_gradient_dump: ", name, " has ",
               lengths.size(), " entries for a batch of ", ids.size(0));
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    QKGRAD_CHECK(lengths[i] >= 0 && lengths[i] <= ids.size(1), "write_gradient_dump: ", name, "[", i, "] = ",
                 lengths[i], " is outside [0, ", ids.size(1), "]");
  }
}

std::string exact(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

double write_gradient_dump(Seq2SeqTransformer& model, const Tensor& src, const std::vector<int64_t>& src_lengths,
                           const Tensor& tgt_in, const Tensor& tgt_out, const std::vector<int64_t>& tgt_lengths,
                           double smoothing, const std::string& path) {
  check_ids("src", src, -1);
  check_ids("tgt_in", tgt_in, src.size(0));
  check_ids("tgt_out", tgt_out, src.size(0));
  QKGRAD_CHECK(tgt_out.shape() == tgt_in.shape(), "write_gradient_dump: tgt_out ", tgt_out.shape(),
               " must have the shape of tgt_in ", tgt_in.shape());
  check_lengths("src_lengths", src_lengths, src);
  check_lengths("tgt_lengths", tgt_lengths, tgt_in);
  QKGRAD_CHECK(smoothing >= 0 && smoothing < 1, "write_gradient_dump: smoothing must be in [0, 1), got ", smoothing);

  const TransformerConfig& config = model.config();
  const std::vector<NamedTensor> params = model.named_parameters();
  for (const NamedTensor& param : params) {
    Tensor handle = param.second;
    handle.clear_grad();  // the dump holds this batch's gradient alone
  }

  EvalModeGuard eval_mode(model);  // no dropout, no word dropout
  const Tensor logits = model.forward(src, src_lengths, tgt_in, tgt_lengths);  // [B, T, V]
  const LossSum summed = cross_entropy(logits, tgt_out, smoothing, config.pad_id);
  QKGRAD_CHECK(summed.tokens > 0, "write_gradient_dump: the batch has no target token (every entry of tgt_out is pad_id ",
               config.pad_id, ")");
  const Tensor loss = summed.sum / static_cast<double>(summed.tokens);
  const double loss_value = loss.item();
  loss.backward();

  // Tensors on any device: safetensors::save copies each to the host as it writes it.
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"src", src},
      {"src_lengths", Tensor::from_ids(src_lengths, {src.size(0)})},
      {"tgt_in", tgt_in},
      {"tgt_out", tgt_out},
      {"tgt_lengths", Tensor::from_ids(tgt_lengths, {tgt_in.size(0)})},
      {"loss", Tensor::scalar(loss_value, DType::f64)},
  };
  for (const auto& [name, p] : params) {
    const Tensor grad = p.grad();
    tensors.emplace_back("grad." + name, grad.defined() ? grad : Tensor::zeros(p.shape(), p.dtype(), p.device()));
  }
  safetensors::save(path, tensors,
                    {{"format", "qkgrad-gradient-dump"},
                     {"dtype", std::string(dtype_name(config.dtype))},
                     {"smoothing", exact(smoothing)},
                     {"pad_id", std::to_string(config.pad_id)},
                     {"tokens", std::to_string(summed.tokens)}});
  return loss_value;
}

}  // namespace qkgrad::translation
