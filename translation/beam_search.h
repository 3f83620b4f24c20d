// Batched beam search with the GNMT length penalty (Wu et al. 2016) and Marian's word penalty:
//   score(Y) = (log P(Y | X) − w·|Y|) / lp(Y),   lp(Y) = ((5 + |Y|) / 6)^α
// (|Y| counts the eos; w = 0 by default, and a negative w rewards every token, lengthening the
// output). An eos is not allowed before min_length tokens (fairseq's --min-len).
// The encoder runs once per batch of sources; the decoder runs one step at a time for all
// B·K hypotheses together, reusing its key/value caches, which are reordered after each step to
// follow the surviving hypotheses. A sentence is done when it has K finished hypotheses
// (BeamStop::first_k, fairseq's rule, the default) or, with BeamStop::bound, when no live beam
// can still beat the K-th best of them; and at the latest when its live beams reach |X| +
// max_extra tokens: then they end with eos, scored like every other ending (fairseq does the
// same). Beam 1 is greedy decoding. The same loop decodes with an
// ensemble, and a second one samples instead of searching.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nn/transformer.h"

namespace qkgrad::translation {

// Sampling instead of beam search (translate --sample; back-translation): each next token is
// drawn from softmax(log p / temperature) over the top_k most likely tokens (0: all of them). A
// source gets `beam` independent samples, best first. Each sample draws from its own
// generator, seeded by (seed, the source's line, the sample's index), so a line's samples do not
// depend on the batch it was decoded in or on the thread count.
struct Sampling {
  bool on = false;
  double temperature = 1.0;  // > 0: below 1 sharper, above 1 flatter
  int64_t top_k = 0;         // 0: no cut
  uint64_t seed = 1;
};

// When a sentence's search stops. first_k (fairseq's rule): as soon as K hypotheses have ended.
// bound: only when no live beam can still beat the K-th best ending: a live beam's log-probability
// can only fall, so its best possible score is the best of (log P − w·L) / lp(L) over the
// lengths L it may still end at (without a word penalty: the longest, which divides by the
// most); the K best endings are kept.
enum class BeamStop { first_k, bound };

struct BeamOptions {
  int64_t beam = 4;         // the beam size (with sampling: the samples per source)
  double alpha = 0.6;       // length penalty exponent (0: plain log-probability)
  int64_t max_extra = 50;   // at most |source| + max_extra output tokens
  Sampling sampling;
  BeamStop stop = BeamStop::first_k;
  int64_t min_length = 0;   // no eos before this many tokens (the max_extra limit still ends a beam)
  double word_penalty = 0;  // w: subtracted from log P per token (eos included) before lp divides
};

// A finished hypothesis: its tokens (no bos/eos), log P(tokens + eos | X), and the score it is
// ranked by, (log P − w·L) / lp(L) with L = |tokens| + 1 (the eos). A beam ended by the length
// limit has its eos scored too.
struct ScoredHypothesis {
  std::vector<int64_t> tokens;
  double log_prob = 0;
  double score = 0;
};

// The models a search decodes with: one, or an ensemble (translate --checkpoint A,B), whose
// next-token log-probabilities are the mean of its members' (Marian's equal weights). Members
// must share the vocabulary and its special ids; their sizes and attention may differ.
using Models = std::vector<Seq2SeqTransformer*>;

// sources: subword ids without eos. Returns every source's finished hypotheses, best first
// (at least one, at most 2·beam when the length limit ends live beams), or its samples when
// options.sampling.on. Runs with autograd off; put the models in eval mode first.
// `lines` (optional) number the sources for the samples' generators (default 0, 1, 2, ...).
std::vector<std::vector<ScoredHypothesis>> beam_search_nbest(const Models& models,
                                                             const std::vector<std::vector<int64_t>>& sources,
                                                             const BeamOptions& options,
                                                             const std::vector<int64_t>& lines = {});
std::vector<std::vector<ScoredHypothesis>> beam_search_nbest(Seq2SeqTransformer& model,
                                                             const std::vector<std::vector<int64_t>>& sources,
                                                             const BeamOptions& options);
// The best hypothesis of each source.
std::vector<std::vector<int64_t>> beam_search(Seq2SeqTransformer& model,
                                              const std::vector<std::vector<int64_t>>& sources,
                                              const BeamOptions& options);

// Translates many sources in batches of about `max_tokens` source tokens (sorted by length,
// results returned in the original order): every source's hypotheses, best first, or the best.
// `done(k)`, when given, is called after each batch with the number of sources translated so far.
using TranslatedCount = std::function<void(std::size_t)>;
std::vector<std::vector<ScoredHypothesis>> translate_all_nbest(const Models& models,
                                                               const std::vector<std::vector<int64_t>>& sources,
                                                               const BeamOptions& options, int64_t max_tokens = 2000,
                                                               const TranslatedCount& done = nullptr,
                                                               const std::vector<int64_t>& lines = {});
std::vector<std::vector<int64_t>> translate_all(Seq2SeqTransformer& model,
                                                const std::vector<std::vector<int64_t>>& sources,
                                                const BeamOptions& options, int64_t max_tokens = 2000,
                                                const TranslatedCount& done = nullptr);

}  // namespace qkgrad::translation
