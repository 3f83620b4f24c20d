// Scoring given translations with a trained model (rescoring, as Marian's scorer or fairseq's
// --score-reference): teacher-forced, dropout off,
//   log P(Y | X) = Σ_t log softmax(logits_t)[y_t]   over the target subwords and the final eos,
// natural log.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/transformer.h"
#include "translation/batching.h"

namespace qkgrad::translation {

struct PairScore {
  double log_prob = 0;  // log P(tgt + eos | src)
  int64_t tokens = 0;   // target subwords + eos: what log_prob sums over
};

// One score per pair, in order, in batches of at most max_tokens padded tokens.
std::vector<PairScore> score_pairs(Seq2SeqTransformer& model, const std::vector<Pair>& pairs, int64_t max_tokens = 2000);

}  // namespace qkgrad::translation
