// How peaked is a trained model's attention? Per attention module, statistics of the
// probability rows P_i· over real (non-padding) query positions of teacher-forced sentence pairs:
// the paper's motivation is that scaled dot-product attention saturates (rows close to one-hot),
// which QKNorm's bounded logits |g q̂·k̂| ≤ g prevent.
#pragma once

#include <string>
#include <vector>

#include "nn/transformer.h"
#include "translation/batching.h"

namespace qkgrad::translation {

struct ModuleAttentionStats {
  std::string module;            // e.g. "decoder.layers.1.cross_attn"
  int64_t rows = 0;              // probability rows counted (sentences × real queries × heads)
  double mean_entropy = 0;       // nats, −Σ_j p_ij ln p_ij, averaged over rows
  double mean_norm_entropy = 0;  // entropy / ln(visible keys), in [0, 1] (rows with 1 key: skipped)
  double mean_max_prob = 0;      // max_j p_ij, averaged over rows
  double saturated_fraction = 0; // rows whose max probability is ≥ 0.9
  double g = 0;                  // the module's QKNorm gain (mean over heads if per head); 0 for scaled dot
};

// Runs the model (no dropout, no gradients) on `pairs` (source, reference target) in batches of
// about `batch_tokens` padded tokens and collects every module's statistics, in the order
// encoder layers (self), then decoder layers (self, cross).
std::vector<ModuleAttentionStats> attention_statistics(Seq2SeqTransformer& model, const std::vector<Pair>& pairs,
                                                       int64_t batch_tokens = 2000);

// One JSON object per module, one per line.
std::string attention_statistics_jsonl(const std::vector<ModuleAttentionStats>& stats);

}  // namespace qkgrad::translation
