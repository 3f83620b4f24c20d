#include "translation/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/ops.h"

namespace qkgrad::translation {

namespace {

constexpr double kDead = -std::numeric_limits<double>::infinity();

struct Hypothesis {
  std::vector<int64_t> tokens;  // generated so far (no bos)
  double log_prob = kDead;      // log P(tokens | X)
};

struct Candidate {
  double log_prob;
  int64_t parent;  // beam index within the sentence
  int64_t token;
};

double length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

// The ranking score of an ending of `length` tokens, eos included (beam_search.h).
double score_of(double log_prob, int64_t length, const BeamOptions& o) {
  return (log_prob - o.word_penalty * static_cast<double>(length)) / length_penalty(length, o.alpha);
}

ScoredHypothesis finish(std::vector<int64_t> tokens, double log_prob, const BeamOptions& o) {
  const double score = score_of(log_prob, static_cast<int64_t>(tokens.size()) + 1, o);
  return {std::move(tokens), log_prob, score};
}

// The best score a live hypothesis can still end with: its log-probability can only fall, so
// the best over the lengths it may end at, log P kept (beam_search.h, BeamStop::bound).
double best_possible(const Hypothesis& h, int64_t max_len, const BeamOptions& o) {
  const int64_t shortest = std::max<int64_t>(static_cast<int64_t>(h.tokens.size()), o.min_length) + 1;
  double best = score_of(h.log_prob, max_len + 1, o);  // at most max_len tokens, then eos
  if (o.word_penalty == 0) return best;  // log P ≤ 0 over the longest lp is the best already
  for (int64_t length = shortest; length <= max_len; ++length) best = std::max(best, score_of(h.log_prob, length, o));
  return best;
}

// Whether a sentence's search may stop (BeamOptions::stop), given its endings so far and its
// live beams after this step. With `bound`, the endings are cut to the K best once it stops.
bool search_done(std::vector<ScoredHypothesis>& finished, const std::vector<Hypothesis>& live, int64_t K,
                 int64_t max_len, const BeamOptions& o) {
  if (static_cast<int64_t>(finished.size()) < K) return false;
  if (o.stop == BeamStop::first_k) return true;
  std::stable_sort(finished.begin(), finished.end(),
                   [](const ScoredHypothesis& x, const ScoredHypothesis& y) { return x.score > y.score; });
  finished.resize(K);
  const double kth = finished.back().score;
  for (const Hypothesis& h : live) {
    if (h.log_prob != kDead && best_possible(h, max_len, o) > kth) return false;  // it might still win
  }
  return true;
}

// The models' decoders side by side, for B sources with K rows each (at first row b·K + k: beam
// or sample k of source b; reorder keeps, repeats and drops rows): each model's encoder output
// and caches. The next-token log-probabilities are the mean over the models (one model: its own).
class Decoder {
 public:
  Decoder(const Models& models, const std::vector<std::vector<int64_t>>& sources, int64_t K, int64_t max_extra)
      : models_(models), device_(models.front()->device()) {
    const TransformerConfig& c = models.front()->config();
    for (const Seq2SeqTransformer* m : models) {
      const TransformerConfig& o = m->config();
      QKGRAD_CHECK(o.vocab == c.vocab && o.bos_id == c.bos_id && o.eos_id == c.eos_id && o.pad_id == c.pad_id,
                   "ensemble: the models must share the vocabulary (", c.vocab, " and ", o.vocab, " pieces)");
      QKGRAD_CHECK(m->device() == device_, "ensemble: the models must be on one device");
    }
    const auto B = static_cast<int64_t>(sources.size());
    int64_t S = 0;  // the encoder input: each source + eos, padded
    for (const auto& s : sources) S = std::max<int64_t>(S, static_cast<int64_t>(s.size()) + 1);
    std::vector<int64_t> src(B * S, c.pad_id), lengths;
    for (int64_t b = 0; b < B; ++b) {
      const auto& s = sources[b];
      std::copy(s.begin(), s.end(), src.begin() + b * S);
      src[b * S + static_cast<int64_t>(s.size())] = c.eos_id;
      lengths.push_back(static_cast<int64_t>(s.size()) + 1);
      max_len.push_back(static_cast<int64_t>(s.size()) + max_extra);
    }
    steps = *std::max_element(max_len.begin(), max_len.end());
    std::vector<int64_t> rows(B * K);  // every source expanded to K rows
    for (int64_t r = 0; r < B * K; ++r) rows[r] = r / K;
    const Tensor src_ids = Tensor::from_ids(src, {B, S}, device_);
    for (Seq2SeqTransformer* m : models_) {
      const Tensor memory = m->encode(src_ids, lengths);  // [B, S, D]
      states_.push_back(m->start_decoding(memory, lengths, steps + 1));
    }
    reorder(rows);
  }

  // previous: each row's last token -> log p(next token) of every row, [rows, V] f64 on the host
  // (a tensor, so that the allocator's cache reuses its memory from step to step).
  Tensor next_log_probs(const std::vector<int64_t>& previous) {
    const Tensor tokens = Tensor::from_ids(previous, {static_cast<int64_t>(previous.size())}, device_);
    Tensor mean;
    for (std::size_t i = 0; i < models_.size(); ++i) {
      const Tensor lp = log_softmax(models_[i]->decode_step(states_[i], tokens));  // [rows, V]
      Tensor host = Tensor::empty(lp.shape(), DType::f64, Device::cpu);
      host.copy_(lp);
      if (i == 0) {
        mean = host;
      } else {
        double* m = mean.data<double>();
        const double* x = host.data<double>();
        for (int64_t j = 0; j < mean.numel(); ++j) m[j] += x[j];
      }
    }
    if (models_.size() > 1) {
      double* m = mean.data<double>();
      for (int64_t j = 0; j < mean.numel(); ++j) m[j] /= static_cast<double>(models_.size());
    }
    return mean;
  }
  // Row i takes the caches of row rows[i]; there are rows.size() rows from then on.
  void reorder(const std::vector<int64_t>& rows) {
    const Tensor r = Tensor::from_ids(rows, {static_cast<int64_t>(rows.size())}, device_);
    for (std::size_t i = 0; i < models_.size(); ++i) models_[i]->reorder(states_[i], r);
  }

  std::vector<int64_t> max_len;  // per source: |x| + max_extra tokens at most
  int64_t steps = 0;             // the largest of them

 private:
  Models models_;
  Device device_;
  std::vector<Seq2SeqTransformer::DecodeState> states_;
};

// 64 random bits from a seed and two indices (SplitMix64's mixing): the seed of one sample's
// generator.
uint64_t mix(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed ^ (a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A token drawn from softmax(row / temperature) over the top_k largest entries of row[0..V)
// (0: all). A uniform double from the generator's top 53 bits, so that the draw is the same on
// every platform (std::uniform_real_distribution is not).
int64_t draw(const double* row, int64_t V, const Sampling& s, std::mt19937_64& gen) {
  std::vector<int64_t> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t keep = s.top_k > 0 ? std::min(s.top_k, V) : V;
  if (keep < V) {
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(),
                      [&](int64_t x, int64_t y) { return row[x] > row[y] || (row[x] == row[y] && x < y); });
  }
  double top = kDead;
  for (int64_t i = 0; i < keep; ++i) top = std::max(top, row[ids[i]]);
  std::vector<double> weights(keep);
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) {
    total += weights[i] = std::exp((row[ids[i]] - top) / s.temperature);
  }
  const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53 * total;
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    sum += weights[i];
    if (u < sum) return ids[i];
  }
  return ids[keep - 1];
}

// K samples of each source: every row decodes on its own, drawing each token; an ended sample's
// row leaves the batch (the only reordering).
std::vector<std::vector<ScoredHypothesis>> sample_nbest(const Models& models, const std::vector<std::vector<int64_t>>& sources,
                                                        const BeamOptions& o, const std::vector<int64_t>& lines) {
  const TransformerConfig& c = models.front()->config();
  const int64_t B = static_cast<int64_t>(sources.size()), K = o.beam, V = c.vocab;
  Decoder decoder(models, sources, K, o.max_extra);
  std::vector<std::mt19937_64> generators;
  for (int64_t r = 0; r < B * K; ++r) {
    const int64_t line = lines.empty() ? r / K : lines[r / K];
    generators.emplace_back(mix(o.sampling.seed, static_cast<uint64_t>(line), static_cast<uint64_t>(r % K)));
  }
  std::vector<Hypothesis> rows(B * K, Hypothesis{{}, 0.0});
  std::vector<int64_t> previous(B * K, c.bos_id);
  std::vector<std::vector<ScoredHypothesis>> samples(B);
  // The samples still drawn, in the decoder's row order (an ended sample leaves the batch).
  std::vector<int64_t> active(B * K);
  std::iota(active.begin(), active.end(), 0);
  for (int64_t t = 0; t <= decoder.steps; ++t) {
    const Tensor log_probs = decoder.next_log_probs(previous);  // [active, V] on the host
    std::vector<int64_t> still_active, kept;                    // kept: their decoder rows
    previous.clear();
    for (std::size_t p = 0; p < active.size(); ++p) {
      const int64_t r = active[p];
      const auto i = static_cast<std::size_t>(r);
      const double* row = log_probs.data<double>() + static_cast<int64_t>(p) * V;
      // At the length limit the sample ends with eos, scored as any other ending.
      const bool out_of_room = t == decoder.max_len[r / K];
      const int64_t token = out_of_room ? c.eos_id : draw(row, V, o.sampling, generators[i]);
      rows[i].log_prob += row[token];
      if (token == c.eos_id) {
        samples[r / K].push_back(finish(std::move(rows[i].tokens), rows[i].log_prob, o));
      } else {
        rows[i].tokens.push_back(token);
        previous.push_back(token);
        still_active.push_back(r);
        kept.push_back(static_cast<int64_t>(p));
      }
    }
    if (still_active.empty()) break;
    if (still_active.size() < active.size()) decoder.reorder(kept);
    active = std::move(still_active);
  }
  for (auto& s : samples) {
    std::stable_sort(s.begin(), s.end(), [](const ScoredHypothesis& x, const ScoredHypothesis& y) { return x.score > y.score; });
  }
  return samples;
}

// One step of one sentence's search. beams: its K live hypotheses; lp: their next-token
// log-probabilities [K, V]. Finished endings go to `finished`; the beams become the K best
// continuations, parents[k] the beam that beam k continues. Returns whether the search of this
// sentence is over.
bool step_sentence(std::vector<Hypothesis>& beams, std::vector<ScoredHypothesis>& finished, const double* lp,
                   int64_t t, int64_t max_len, int64_t V, int64_t eos, const BeamOptions& o,
                   std::vector<int64_t>& parents) {
  const auto K = static_cast<int64_t>(beams.size());
  if (t == max_len) {
    // Out of room: every live beam (|x| + max_extra tokens) ends here with eos, its log p(eos)
    // counted as for any other ending, so that every finished score is log P(y + eos) / lp.
    for (int64_t k = 0; k < K; ++k) {
      const Hypothesis& h = beams[k];
      if (h.log_prob != kDead) finished.push_back(finish(h.tokens, h.log_prob + lp[k * V + eos], o));
    }
    return true;
  }
  // The best 2K continuations of all live beams (2K so that K survive even if K end here);
  // before min_length tokens, eos is not one of them.
  const bool may_end = t >= o.min_length;
  std::vector<Candidate> cands;
  for (int64_t k = 0; k < K; ++k) {
    const Hypothesis& h = beams[k];
    if (h.log_prob == kDead) continue;
    const double* row = lp + k * V;
    std::vector<int64_t> ids;
    ids.reserve(V);
    for (int64_t v = 0; v < V; ++v) {
      if (may_end || v != eos) ids.push_back(v);
    }
    const auto keep = std::min<std::ptrdiff_t>(2 * K, static_cast<std::ptrdiff_t>(ids.size()));
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&](int64_t x, int64_t y) {
      return row[x] > row[y] || (row[x] == row[y] && x < y);
    });
    for (std::ptrdiff_t i = 0; i < keep; ++i) cands.push_back({h.log_prob + row[ids[i]], k, ids[i]});
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) {
    if (x.log_prob != y.log_prob) return x.log_prob > y.log_prob;
    if (x.parent != y.parent) return x.parent < y.parent;
    return x.token < y.token;
  });
  std::vector<Hypothesis> next;
  for (std::size_t rank = 0; rank < cands.size(); ++rank) {
    const Candidate& cand = cands[rank];
    const Hypothesis& parent = beams[cand.parent];
    if (cand.token == eos) {
      // An ending counts only if it is among the K best candidates of this step: beam 1 is
      // then exactly greedy decoding.
      const bool room = o.stop == BeamStop::bound || static_cast<int64_t>(finished.size()) < K;
      if (static_cast<int64_t>(rank) < K && room) finished.push_back(finish(parent.tokens, cand.log_prob, o));
    } else if (static_cast<int64_t>(next.size()) < K) {
      Hypothesis h{parent.tokens, cand.log_prob};
      h.tokens.push_back(cand.token);
      next.push_back(std::move(h));
      parents.push_back(cand.parent);
    }
  }
  const bool done = search_done(finished, next, K, max_len, o);
  while (static_cast<int64_t>(next.size()) < K) {  // pad with dead beams
    next.push_back(Hypothesis{});
    parents.push_back(0);
  }
  beams = std::move(next);
  return done;
}

}  // namespace

std::vector<std::vector<ScoredHypothesis>> beam_search_nbest(const Models& models,
                                                             const std::vector<std::vector<int64_t>>& sources,
                                                             const BeamOptions& o, const std::vector<int64_t>& lines) {
  QKGRAD_CHECK(!models.empty(), "beam search: no model");
  QKGRAD_CHECK(o.beam >= 1, "beam search: the beam size must be >= 1, got ", o.beam);
  QKGRAD_CHECK(o.alpha >= 0 && std::isfinite(o.alpha), "beam search: alpha must be >= 0, got ", o.alpha);
  QKGRAD_CHECK(o.max_extra >= 1, "beam search: max_extra must be >= 1, got ", o.max_extra);
  QKGRAD_CHECK(o.min_length >= 0, "beam search: min_length must be >= 0, got ", o.min_length);
  QKGRAD_CHECK(std::isfinite(o.word_penalty), "beam search: the word penalty must be finite, got ", o.word_penalty);
  QKGRAD_CHECK(!o.sampling.on || o.min_length == 0, "sampling: min_length shapes the beam search only (a sample is "
               "drawn from the model as it is)");
  QKGRAD_CHECK(o.sampling.temperature > 0 && std::isfinite(o.sampling.temperature),
               "sampling: the temperature must be > 0, got ", o.sampling.temperature);
  QKGRAD_CHECK(o.sampling.top_k >= 0, "sampling: top-k must be >= 0, got ", o.sampling.top_k);
  QKGRAD_CHECK(lines.empty() || lines.size() == sources.size(), "beam search: ", lines.size(), " line numbers for ",
               sources.size(), " sources");
  if (sources.empty()) return {};
  NoGradGuard no_grad;
  if (o.sampling.on) return sample_nbest(models, sources, o, lines);
  const TransformerConfig& c = models.front()->config();
  const int64_t B = static_cast<int64_t>(sources.size()), K = o.beam, V = c.vocab;
  Decoder decoder(models, sources, K, o.max_extra);
  const std::vector<int64_t>& max_len = decoder.max_len;
  std::vector<std::vector<Hypothesis>> live(B, std::vector<Hypothesis>(K));
  std::vector<std::vector<ScoredHypothesis>> finished(B);
  for (auto& beams : live) beams[0].log_prob = 0;  // one live beam to start with
  // The sentences still searched, in the decoder's row order: active[p]'s beams are rows
  // p·K … p·K + K − 1. A finished sentence leaves the batch (as in fairseq), so that the
  // decoder's work follows the sentences still open, not the longest one.
  std::vector<int64_t> active(B);
  std::iota(active.begin(), active.end(), 0);
  std::vector<int64_t> previous(B * K, c.bos_id);  // each row's last token

  // Steps 0 … steps − 1 choose tokens; a sentence's step max_len only ends its live beams.
  for (int64_t t = 0; t <= decoder.steps; ++t) {
    const Tensor log_probs = decoder.next_log_probs(previous);  // [active · K, V] on the host
    const double* lp = log_probs.data<double>();
    std::vector<int64_t> still_active, rows;  // rows: the decoder rows the next step continues
    previous.clear();
    for (std::size_t p = 0; p < active.size(); ++p) {
      const int64_t b = active[p];
      const double* sentence_lp = lp + static_cast<int64_t>(p) * K * V;  // [K, V]
      std::vector<int64_t> parents;
      if (step_sentence(live[b], finished[b], sentence_lp, t, max_len[b], V, c.eos_id, o, parents)) continue;
      still_active.push_back(b);
      for (int64_t k = 0; k < K; ++k) {
        rows.push_back(static_cast<int64_t>(p) * K + parents[k]);
        const auto& h = live[b][k];
        previous.push_back(h.tokens.empty() ? c.eos_id : h.tokens.back());
      }
    }
    if (still_active.empty()) break;
    active = std::move(still_active);
    decoder.reorder(rows);  // every row takes the caches of its parent
  }

  // Best first; equal scores keep the order they finished in (the first is what beam_search
  // returned before n-best lists existed).
  for (auto& f : finished) {
    std::stable_sort(f.begin(), f.end(), [](const ScoredHypothesis& x, const ScoredHypothesis& y) { return x.score > y.score; });
    if (f.empty()) f.push_back({{}, kDead, kDead});  // cannot happen (every live beam ends at the limit), but never empty
  }
  return finished;
}

std::vector<std::vector<ScoredHypothesis>> beam_search_nbest(Seq2SeqTransformer& model,
                                                             const std::vector<std::vector<int64_t>>& sources,
                                                             const BeamOptions& options) {
  return beam_search_nbest(Models{&model}, sources, options);
}

std::vector<std::vector<int64_t>> beam_search(Seq2SeqTransformer& model, const std::vector<std::vector<int64_t>>& sources,
                                              const BeamOptions& options) {
  std::vector<std::vector<int64_t>> best;
  for (auto& hypotheses : beam_search_nbest(model, sources, options)) best.push_back(std::move(hypotheses.front().tokens));
  return best;
}

std::vector<std::vector<ScoredHypothesis>> translate_all_nbest(const Models& models,
                                                               const std::vector<std::vector<int64_t>>& sources,
                                                               const BeamOptions& options, int64_t max_tokens,
                                                               const TranslatedCount& done, const std::vector<int64_t>& lines) {
  std::vector<int64_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return sources[a].size() < sources[b].size();
  });
  std::vector<std::vector<ScoredHypothesis>> out(sources.size());
  std::size_t i = 0;
  while (i < order.size()) {
    std::vector<std::vector<int64_t>> group;
    std::vector<int64_t> ids, group_lines;
    int64_t longest = 0;
    while (i < order.size()) {
      const auto& s = sources[order[i]];
      const int64_t len = static_cast<int64_t>(s.size()) + 1;
      if (!group.empty() && (static_cast<int64_t>(group.size()) + 1) * std::max(longest, len) > max_tokens) break;
      longest = std::max(longest, len);
      group.push_back(s);
      ids.push_back(order[i]);
      group_lines.push_back(lines.empty() ? order[i] : lines[order[i]]);
      ++i;
    }
    auto translated = beam_search_nbest(models, group, options, group_lines);
    for (std::size_t j = 0; j < ids.size(); ++j) out[ids[j]] = std::move(translated[j]);
    if (done) done(i);
  }
  return out;
}

std::vector<std::vector<int64_t>> translate_all(Seq2SeqTransformer& model, const std::vector<std::vector<int64_t>>& sources,
                                                const BeamOptions& options, int64_t max_tokens, const TranslatedCount& done) {
  std::vector<std::vector<int64_t>> best;
  for (auto& hypotheses : translate_all_nbest(Models{&model}, sources, options, max_tokens, done)) {
    best.push_back(std::move(hypotheses.front().tokens));
  }
  return best;
}

}  // namespace qkgrad::translation
