// libFuzzer target for BLEU and chrF (translation/bleu.h) on arbitrary bytes, UTF-8 or
// not.
//
// The whole input goes through tokenize_13a; then its lines, taken in pairs (hypothesis,
// reference), are a corpus for corpus_bleu (13a and whitespace tokenisation) and corpus_chrf.
// What it checks, for any input:
//   - tokenize_13a never crashes, returns tokens separated by single spaces with none at either
//     end, and keeps valid UTF-8 valid;
//   - the scorers either throw qkgrad::Error exactly when the corpus cannot be scored (no pairs,
//     a line that is not UTF-8; an empty reference is scored, as sacreBLEU 2.6 scores it) or
//     return finite scores in [0, 100],
//     precisions in [0, 100], a brevity penalty in [0, 1] and consistent counts;
//   - the corpus statistics are the sum of the per-line statistics;
//   - the references scored against themselves get BLEU 100 (when there are 4-grams at all) and
//     chrF 100 (when there are characters at all).
// Never a crash, undefined behaviour, leak or an exception other than qkgrad::Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "io/text.h"
#include "translation/bleu.h"

using namespace qkgrad;
using namespace qkgrad::translation;

namespace {

void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz-bleu: invariant violated: %s\n", what);
  std::abort();
}

bool in_range(double x, double lo, double hi) { return std::isfinite(x) && x >= lo && x <= hi; }

bool same_stats(const BleuStats& a, const BleuStats& b) {
  bool same = a.hyp_len == b.hyp_len && a.ref_len == b.ref_len;
  for (int n = 0; n < 4; ++n) same = same && a.correct[n] == b.correct[n] && a.total[n] == b.total[n];
  return same;
}

void check_tokenize(std::string_view text) {
  const std::string tokens = tokenize_13a(text);
  require(tokens.empty() || (tokens.front() != ' ' && tokens.back() != ' '),
          "tokenize_13a: a space at an end");
  require(tokens.find("  ") == std::string::npos, "tokenize_13a: a doubled space");
  require(first_invalid_utf8(text) != std::string_view::npos ||
              first_invalid_utf8(tokens) == std::string_view::npos,
          "tokenize_13a: valid UTF-8 in, invalid UTF-8 out");
}

// Must the scorers refuse this corpus? (bleu.h: no pairs, or a line that is not UTF-8; an empty
// reference line is scored, its hypothesis's n-grams matching nothing.)
bool refused(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.empty()) return true;
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    if (first_invalid_utf8(hyps[i]) != std::string_view::npos ||
        first_invalid_utf8(refs[i]) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

void check_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                BleuTokenize tokenize) {
  BleuStats stats;
  try {
    stats = corpus_bleu_stats(hyps, refs, tokenize);
  } catch (const qkgrad::Error&) {
    require(refused(hyps, refs), "corpus_bleu refused a valid corpus");
    return;
  }
  require(!refused(hyps, refs), "corpus_bleu accepted an invalid corpus");

  BleuStats sum;
  for (std::size_t i = 0; i < hyps.size(); ++i) sum += corpus_bleu_stats({hyps[i]}, {refs[i]}, tokenize);
  require(same_stats(stats, sum), "corpus statistics differ from the sum of the lines'");
  for (int n = 0; n < 4; ++n) {
    require(stats.correct[n] >= 0 && stats.correct[n] <= stats.total[n], "correct > total");
    require(stats.total[n] <= stats.hyp_len, "more n-grams than words");
    require(n == 0 || stats.total[n] <= stats.total[n - 1], "more n-grams of a higher order");
  }

  const BleuScore score = bleu_from_stats(stats);
  require(in_range(score.score, 0.0, 100.0), "BLEU outside [0, 100]");
  for (double p : score.precision) require(in_range(p, 0.0, 100.0), "a precision outside [0, 100]");
  require(in_range(score.brevity_penalty, 0.0, 1.0), "brevity penalty outside [0, 1]");
  require(std::isfinite(score.ratio) && score.ratio >= 0.0, "a negative or non-finite ratio");
  require(!score.format().empty(), "an empty summary");

  // The references against themselves.
  const BleuStats self = corpus_bleu_stats(refs, refs, tokenize);
  const BleuScore perfect = bleu_from_stats(self);
  if (self.total[3] > 0) {
    require(std::fabs(perfect.score - 100.0) < 1e-9, "references against themselves: BLEU != 100");
  } else {
    require(perfect.score == 0.0, "BLEU without 4-grams is not 0");
  }
}

void check_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  double chrf = 0.0;
  try {
    chrf = corpus_chrf(hyps, refs);
  } catch (const qkgrad::Error&) {
    require(refused(hyps, refs), "corpus_chrf refused a valid corpus");
    return;
  }
  require(!refused(hyps, refs), "corpus_chrf accepted an invalid corpus");
  require(in_range(chrf, 0.0, 100.0), "chrF outside [0, 100]");
  const double self = corpus_chrf(refs, refs);
  require(self == 0.0 || std::fabs(self - 100.0) < 1e-9, "references against themselves: chrF not 0 or 100");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_tokenize(text);

  // Lines 1, 3, 5, ... are hypotheses; lines 2, 4, 6, ... their references.
  std::vector<std::string> hyps, refs;
  bool hypothesis = true;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    (hypothesis ? hyps : refs).emplace_back(text.substr(start, end - start));
    hypothesis = !hypothesis;
    start = end + 1;
  }
  if (hyps.size() > refs.size()) hyps.pop_back();

  check_bleu(hyps, refs, BleuTokenize::t13a);
  check_bleu(hyps, refs, BleuTokenize::none);
  check_chrf(hyps, refs);
  return 0;
}
