#include "translation/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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

}  // namespace

std::vector<std::vector<ScoredHypothesis>> beam_search_nbest(Seq2SeqTransformer& model,
                                                             const std::vector<std::vector<int64_t>>& sources,
                                                             const BeamOptions& o) {
  QKGRAD_CHECK(o.beam >= 1, "beam search: the beam size must be >= 1, got ", o.beam);
  QKGRAD_CHECK(o.alpha >= 0 && std::isfinite(o.alpha), "beam search: alpha must be >= 0, got ", o.alpha);
  QKGRAD_CHECK(o.max_extra >= 1, "beam search: max_extra must be >= 1, got ", o.max_extra);
  if (sources.empty()) return {};
  NoGradGuard no_grad;
  const TransformerConfig& c = model.config();
  const int64_t B = static_cast<int64_t>(sources.size()), K = o.beam, V = c.vocab;

  // The encoder input: each source + eos, padded.
  int64_t S = 0;
  for (const auto& s : sources) S = std::max<int64_t>(S, static_cast<int64_t>(s.size()) + 1);
  std::vector<int64_t> src(static_cast<std::size_t>(B * S), c.pad_id), lengths;
  std::vector<int64_t> max_len;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = sources[static_cast<std::size_t>(b)];
    std::copy(s.begin(), s.end(), src.begin() + b * S);
    src[static_cast<std::size_t>(b * S) + s.size()] = c.eos_id;
    lengths.push_back(static_cast<int64_t>(s.size()) + 1);
    max_len.push_back(static_cast<int64_t>(s.size()) + o.max_extra);
  }
  const int64_t steps = *std::max_element(max_len.begin(), max_len.end());
  // Every id tensor goes to the model's device; only the log-probabilities come back.
  const Device device = model.device();
  const Tensor memory = model.encode(Tensor::from_ids(src, {B, S}, device), lengths);  // [B, S, D]
  auto state = model.start_decoding(memory, lengths, steps + 1);
  // Expand every sentence to K rows: row b·K + k is beam k of sentence b.
  std::vector<int64_t> rows(static_cast<std::size_t>(B * K));
  for (int64_t r = 0; r < B * K; ++r) rows[static_cast<std::size_t>(r)] = r / K;
  model.reorder(state, Tensor::from_ids(rows, {B * K}, device));

  std::vector<std::vector<Hypothesis>> live(static_cast<std::size_t>(B), std::vector<Hypothesis>(static_cast<std::size_t>(K)));
  std::vector<std::vector<ScoredHypothesis>> finished(static_cast<std::size_t>(B));
  std::vector<bool> done(static_cast<std::size_t>(B), false);
  for (auto& beams : live) beams[0].log_prob = 0;  // one live beam to start with
  std::vector<int64_t> previous(static_cast<std::size_t>(B * K), c.bos_id);

  // Steps 0 … steps − 1 choose tokens; a sentence's step max_len only ends its live beams.
  for (int64_t t = 0; t <= steps; ++t) {
    const Tensor logits = model.decode_step(state, Tensor::from_ids(previous, {B * K}, device));  // [B·K, V]
    const std::vector<double> lp = log_softmax(logits).to_vector();  // on the host
    for (int64_t b = 0; b < B; ++b) {
      auto& beams = live[static_cast<std::size_t>(b)];
      if (done[static_cast<std::size_t>(b)]) continue;
      if (t == max_len[static_cast<std::size_t>(b)]) {
        // Out of room: every live beam (|x| + max_extra tokens) ends here with eos, its log p(eos)
        // counted as for any other ending, so that every finished score is log P(y + eos) / lp.
        for (int64_t k = 0; k < K; ++k) {
          const Hypothesis& h = beams[static_cast<std::size_t>(k)];
          if (h.log_prob == kDead) continue;
          const double log_prob = h.log_prob + lp[static_cast<std::size_t>((b * K + k) * V + c.eos_id)];
          finished[static_cast<std::size_t>(b)].push_back(
              {h.tokens, log_prob, log_prob / length_penalty(static_cast<int64_t>(h.tokens.size()) + 1, o.alpha)});
        }
        done[static_cast<std::size_t>(b)] = true;  // its rows are never read again
        continue;
      }
      // The best 2K continuations of all live beams (2K so that K survive even if K end here).
      std::vector<Candidate> cands;
      for (int64_t k = 0; k < K; ++k) {
        const Hypothesis& h = beams[static_cast<std::size_t>(k)];
        if (h.log_prob == kDead) continue;
        const double* row = lp.data() + (b * K + k) * V;
        std::vector<int64_t> ids(static_cast<std::size_t>(V));
        std::iota(ids.begin(), ids.end(), 0);
        const int64_t keep = std::min<int64_t>(2 * K, V);
        std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&](int64_t x, int64_t y) {
          return row[x] > row[y] || (row[x] == row[y] && x < y);
        });
        for (int64_t i = 0; i < keep; ++i) {
          const int64_t v = ids[static_cast<std::size_t>(i)];
          cands.push_back({h.log_prob + row[v], k, v});
        }
      }
      std::sort(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) {
        if (x.log_prob != y.log_prob) return x.log_prob > y.log_prob;
        if (x.parent != y.parent) return x.parent < y.parent;
        return x.token < y.token;
      });
      std::vector<Hypothesis> next;
      std::vector<int64_t> parents;
      for (std::size_t rank = 0; rank < cands.size(); ++rank) {
        const Candidate& cand = cands[rank];
        const Hypothesis& parent = beams[static_cast<std::size_t>(cand.parent)];
        if (cand.token == c.eos_id) {
          // An ending counts only if it is among the K best candidates of this step: beam 1 is
          // then exactly greedy decoding.
          if (static_cast<int64_t>(rank) < K && static_cast<int64_t>(finished[static_cast<std::size_t>(b)].size()) < K) {
            finished[static_cast<std::size_t>(b)].push_back(
                {parent.tokens, cand.log_prob,
                 cand.log_prob / length_penalty(static_cast<int64_t>(parent.tokens.size()) + 1, o.alpha)});
          }
        } else if (static_cast<int64_t>(next.size()) < K) {
          Hypothesis h{parent.tokens, cand.log_prob};
          h.tokens.push_back(cand.token);
          next.push_back(std::move(h));
          parents.push_back(cand.parent);
        }
      }
      if (static_cast<int64_t>(finished[static_cast<std::size_t>(b)].size()) >= K) done[static_cast<std::size_t>(b)] = true;
      while (static_cast<int64_t>(next.size()) < K) {  // pad with dead beams
        next.push_back(Hypothesis{});
        parents.push_back(0);
      }
      for (int64_t k = 0; k < K; ++k) {
        rows[static_cast<std::size_t>(b * K + k)] = b * K + parents[static_cast<std::size_t>(k)];
        const auto& h = next[static_cast<std::size_t>(k)];
        previous[static_cast<std::size_t>(b * K + k)] = h.tokens.empty() ? c.eos_id : h.tokens.back();
      }
      beams = std::move(next);
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    // Every row now takes the caches of its parent (rows of finished sentences keep whatever
    // they last had: they are never read again).
    model.reorder(state, Tensor::from_ids(rows, {B * K}, device));
  }

  // Best first; equal scores keep the order they finished in (the first is what beam_search
  // returned before n-best lists existed).
  for (auto& f : finished) {
    std::stable_sort(f.begin(), f.end(), [](const ScoredHypothesis& x, const ScoredHypothesis& y) { return x.score > y.score; });
    if (f.empty()) f.push_back({{}, kDead, kDead});  // cannot happen (every live beam ends at the limit), but never empty
  }
  return finished;
}

std::vector<std::vector<int64_t>> beam_search(Seq2SeqTransformer& model, const std::vector<std::vector<int64_t>>& sources,
                                              const BeamOptions& options) {
  std::vector<std::vector<int64_t>> best;
  for (auto& hypotheses : beam_search_nbest(model, sources, options)) best.push_back(std::move(hypotheses.front().tokens));
  return best;
}

std::vector<std::vector<ScoredHypothesis>> translate_all_nbest(Seq2SeqTransformer& model,
                                                               const std::vector<std::vector<int64_t>>& sources,
                                                               const BeamOptions& options, int64_t max_tokens,
                                                               const TranslatedCount& done) {
  std::vector<int64_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return sources[static_cast<std::size_t>(a)].size() < sources[static_cast<std::size_t>(b)].size();
  });
  std::vector<std::vector<ScoredHypothesis>> out(sources.size());
  std::size_t i = 0;
  while (i < order.size()) {
    std::vector<std::vector<int64_t>> group;
    std::vector<int64_t> ids;
    int64_t longest = 0;
    while (i < order.size()) {
      const auto& s = sources[static_cast<std::size_t>(order[i])];
      const int64_t len = static_cast<int64_t>(s.size()) + 1;
      if (!group.empty() && (static_cast<int64_t>(group.size()) + 1) * std::max(longest, len) > max_tokens) break;
      longest = std::max(longest, len);
      group.push_back(s);
      ids.push_back(order[i]);
      ++i;
    }
    auto translated = beam_search_nbest(model, group, options);
    for (std::size_t j = 0; j < ids.size(); ++j) out[static_cast<std::size_t>(ids[j])] = std::move(translated[j]);
    if (done) done(i);
  }
  return out;
}

std::vector<std::vector<int64_t>> translate_all(Seq2SeqTransformer& model, const std::vector<std::vector<int64_t>>& sources,
                                                const BeamOptions& options, int64_t max_tokens, const TranslatedCount& done) {
  std::vector<std::vector<int64_t>> best;
  for (auto& hypotheses : translate_all_nbest(model, sources, options, max_tokens, done)) {
    best.push_back(std::move(hypotheses.front().tokens));
  }
  return best;
}

}  // namespace qkgrad::translation
