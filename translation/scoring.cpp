#include "translation/scoring.h"

#include "core/autograd.h"
#include "ops/ops.h"

namespace qkgrad::translation {

std::vector<PairScore> score_pairs(Seq2SeqTransformer& model, const std::vector<Pair>& pairs, int64_t max_tokens) {
  NoGradGuard no_grad;
  std::vector<PairScore> scores(pairs.size());
  if (pairs.empty()) return scores;
  const BatchPlan plan(pairs, max_tokens);
  for (int64_t g = 0; g < plan.batches_per_epoch(); ++g) {
    const Batch b = make_batch(pairs, plan.group(g), model.device(), special_ids(model.config()));
    const Tensor logits = model.forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);  // [B, T, V]
    const int64_t B = logits.size(0), T = logits.size(1);
    // log P of each target token: log_softmax over V, picked at tgt_out.
    const Tensor picked = gather(log_softmax(logits), 2, b.tgt_out.reshape({B, T, 1}));  // [B, T, 1]
    const std::vector<double> lp = picked.to_vector();                                   // on the host
    for (int64_t r = 0; r < B; ++r) {
      PairScore& s = scores[b.indices[r]];
      s.tokens = b.tgt_lengths[r];
      for (int64_t t = 0; t < s.tokens; ++t) s.log_prob += lp[r * T + t];
    }
  }
  return scores;
}

}  // namespace qkgrad::translation
