// Batched beam search with the GNMT length penalty (Wu et al. 2016):
//   score(Y) = log P(Y | X) / lp(Y),   lp(Y) = ((5 + |Y|) / 6)^α
// The encoder runs once per batch of sources; the decoder runs one step at a time for all
// B·K hypotheses together, reusing its key/value caches, which are reordered after each step to
// follow the surviving hypotheses. A sentence is done when it has K finished hypotheses or
// reaches |X| + max_extra tokens. Beam 1 is greedy decoding.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/transformer.h"

namespace qkgrad::translation {

struct BeamOptions {
  int64_t beam = 4;
  double alpha = 0.6;       // length penalty exponent (0: plain log-probability)
  int64_t max_extra = 50;   // at most |source| + max_extra output tokens
};

// sources: subword ids without eos. Returns the best hypothesis per source, without bos/eos.
// Runs with autograd off; put the model in eval mode first.
std::vector<std::vector<int64_t>> beam_search(Seq2SeqTransformer& model,
                                              const std::vector<std::vector<int64_t>>& sources,
                                              const BeamOptions& options);

// Translates many sources in batches of about `max_tokens` source tokens (sorted by length,
// results returned in the original order).
std::vector<std::vector<int64_t>> translate_all(Seq2SeqTransformer& model,
                                                const std::vector<std::vector<int64_t>>& sources,
                                                const BeamOptions& options, int64_t max_tokens = 2000);

}  // namespace qkgrad::translation
