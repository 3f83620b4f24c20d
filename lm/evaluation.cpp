// A language model's loss, perplexity and bits per byte on a text. See lm/evaluation.h.
#include "lm/evaluation.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/autograd.h"
#include "core/error.h"
#include "io/text.h"
#include "ops/ops.h"

namespace qkgrad::lm {

double TextScore::loss() const { return loss_sum / static_cast<double>(std::max<int64_t>(bytes, 1)); }
double TextScore::perplexity() const { return std::exp(loss()); }
double TextScore::bits_per_byte() const { return loss() / std::numbers::ln2; }

std::string TextScore::line() const {
  return cat("loss ", format_number("%.4f", loss()), ", perplexity ", format_number("%.3f", perplexity()), ", ",
             format_number("%.4f", bits_per_byte()), " bits per byte on ", bytes, " bytes");
}

TextScore score_text(LanguageModel& model, const Windows& text, const std::vector<int64_t>& windows, int64_t batch_size,
                     const std::function<void(int64_t, int64_t)>& shown) {
  const EvalMode eval_mode(model);
  NoGradGuard no_grad;
  TextScore score;
  const auto total = static_cast<int64_t>(windows.size());
  for (int64_t start = 0; start < total; start += batch_size) {
    const std::vector<int64_t> part(windows.begin() + start, windows.begin() + std::min(total, start + batch_size));
    const Windows::Batch b = text.batch(part, model.device());
    const LossSum l = cross_entropy(model.forward(b.inputs, b.lengths), b.targets, 0.0, -1);  // logits [B, C, 256]
    score.loss_sum += l.sum.item();
    score.bytes += l.tokens;
    if (shown) shown(std::min(total, start + batch_size), total);
  }
  return score;
}

}  // namespace qkgrad::lm
