// sacreBLEU-compatible scoring of translations: corpus BLEU (with its 13a tokenizer) and chrF.
//
// The numbers match sacreBLEU 2.x with a single reference and its defaults, so a score printed
// here can be compared with published ones:
//
//   BLEU  (sacreBLEU's BLEU(): tokenize '13a', smooth 'exp', n-gram order 4, case-sensitive)
//     Each hypothesis and reference line is tokenized, then for n = 1..4
//       total[n]   = number of n-grams in the hypotheses
//       correct[n] = the hypothesis n-grams also in the reference, each counted at most as often
//                    as it occurs there ("clipped"), summed over the corpus
//       p[n]       = 100 · correct[n] / total[n]          (percent)
//     BLEU = BP · exp( (log p1 + log p2 + log p3 + log p4) / 4 )
//     BP   = 1 if hyp_len ≥ ref_len, else exp(1 − ref_len / hyp_len)   (0 when hyp_len = 0)
//     'exp' smoothing: the k-th order with correct[n] = 0 gets p[n] = 100 / (2^k · total[n]);
//     if no n-gram matches at all, BLEU = 0 and all precisions are reported as 0.
//
//   chrF  (sacreBLEU's CHRF(): character n-grams 1..6, no word n-grams, beta = 2, whitespace
//     removed, no eps smoothing). Character n-gram counts are summed over the corpus; for each
//     order that both sides have, precision P_n = matched / hyp and recall R_n = matched / ref;
//     P and R are the averages over those orders, and chrF = 100 · (1 + β²) P R / (β² P + R).
//
// Text is UTF-8; "characters" are Unicode code points and "whitespace" is what Python's
// str.split() splits on (ASCII whitespace, U+0085, U+00A0, U+2000..U+200A, U+3000, ...),
// because that is what sacreBLEU sees.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkgrad::translation {

// How BLEU splits a line into words.
//   t13a: the mteval-v13a rules (sacreBLEU's default, for detokenized text)
//   none: split on whitespace only (like multi-bleu.perl on text that is already tokenized)
enum class BleuTokenize { t13a, none };

// A corpus BLEU score and its parts, as sacreBLEU reports them.
struct BleuScore {
  double score = 0.0;                        // 0..100
  double precision[4] = {0.0, 0.0, 0.0, 0.0};  // n-gram precisions in percent, n = 1..4
  double brevity_penalty = 0.0;
  double ratio = 0.0;                        // hyp_len / ref_len (0 when ref_len = 0)
  int64_t hyp_len = 0;                       // words in all hypotheses
  int64_t ref_len = 0;                       // words in all references

  // sacreBLEU's one-line summary, e.g.
  //   BLEU = 33.24 64.9/40.5/26.6/17.8 (BP = 0.995 ratio = 0.995 hyp_len = 1234 ref_len = 1240)
  std::string format() const;
  // The part after the score: "64.9/40.5/26.6/17.8 (BP = 0.995 ratio = ... ref_len = 1240)".
  std::string verbose() const;
};

// BLEU's sufficient statistics: everything the score depends on. Statistics of parts of a
// corpus add up (operator+=) to those of the whole.
struct BleuStats {
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
  int64_t correct[4] = {0, 0, 0, 0};  // clipped n-gram matches, n = 1..4
  int64_t total[4] = {0, 0, 0, 0};    // hypothesis n-grams, n = 1..4

  BleuStats& operator+=(const BleuStats& other);
};

// sacreBLEU's 13a tokenizer on one line: removes "<skipped>", joins "-\n" hyphenations,
// unescapes &quot; &amp; &lt; &gt;, splits off punctuation and symbols (but keeps "3.14",
// "1,000" and "don't" whole), and returns the tokens joined by single spaces.
std::string tokenize_13a(std::string_view line);

// Several references per hypothesis, as sacreBLEU takes them: references[r][i] is the r-th
// reference of hypothesis i (every stream has one line per hypothesis). A segment is scored
// against its non-empty references; when all of them are empty, against one empty reference.
//   BLEU: each hypothesis n-gram counts at most as often as in the one reference where it occurs
//         most; the reference length is the one closest to the hypothesis's (the shorter of two
//         equally close).
//   chrF: a segment's statistics are those of the reference that gives it the best chrF (the
//         first of equals).
using ReferenceStreams = std::vector<std::vector<std::string>>;

// How the lines are prepared before scoring (sacreBLEU's tokenize= and lowercase=).
struct ScoringOptions {
  BleuTokenize tokenize = BleuTokenize::t13a;
  bool lowercase = false;  // Python's str.lower() of every line first; the signatures say case:lc
};

// Corpus BLEU. Throws qkgrad::Error if a stream's length differs from the hypotheses', a line is
// not UTF-8 or the corpus is empty. An empty reference line is scored, as sacreBLEU 2.6 does
// (its hypothesis's n-grams match nothing).
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                      const ScoringOptions& options);
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references,
                      BleuTokenize tokenize = BleuTokenize::t13a);

// The statistics of each segment (same checks, same errors): their sum is the corpus's.
std::vector<BleuStats> segment_bleu_stats(const std::vector<std::string>& hypotheses,
                                          const ReferenceStreams& references, const ScoringOptions& options);
BleuStats corpus_bleu_stats(const std::vector<std::string>& hypotheses,
                            const std::vector<std::string>& references,
                            BleuTokenize tokenize = BleuTokenize::t13a);

// The BLEU score (exp smoothing, order 4) of already collected statistics. With
// effective_order (sacreBLEU's sentence-level BLEU) the mean runs over the orders up to the last
// one the hypothesis has n-grams of, so a 3-word sentence can score.
BleuScore bleu_from_stats(const BleuStats& stats, bool effective_order = false);

// Sentence-level BLEU of each hypothesis (effective order, eff:yes), as sacreBLEU -sl.
std::vector<BleuScore> sentence_bleu(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                                     const ScoringOptions& options);

// Corpus chrF (0..100) with sacreBLEU's CHRF defaults; same checks and errors as corpus_bleu.
double corpus_chrf(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                   const ScoringOptions& options);
double corpus_chrf(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references);
// chrF of each hypothesis on its own.
std::vector<double> sentence_chrf(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                                  const ScoringOptions& options);

// The signatures' nrefs: the number of references per segment (its non-empty ones, at least 1),
// or "var" when it varies.
std::string reference_count(const ReferenceStreams& references);

// sacreBLEU-style signatures naming how a score was computed, to print beside it:
//   BLEU: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:qkgrad-0.1.0"
//   chrF: "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:qkgrad-0.1.0"
// (the version is qkgrad's: these are sacreBLEU 2.x's definitions, computed by qkgrad).
std::string bleu_signature(const ScoringOptions& options, const std::string& nrefs, bool effective_order);
std::string chrf_signature(const ScoringOptions& options, const std::string& nrefs);
std::string bleu_signature(BleuTokenize tokenize);  // one reference, mixed case, corpus level
std::string chrf_signature();

// Python's str.lower() of UTF-8 text: glibc's Unicode simple case mapping, plus Python's two
// context rules that matter in practice (İ becomes i + U+0307; Σ becomes final ς after a letter
// and not before one). Bytes that are not UTF-8 are kept.
std::string lowercase_utf8(std::string_view text);

// sacreBLEU's warning for detokenised scoring of tokenised text: with the 13a tokeniser, more
// than 100 hypotheses ending in a tokenised period (" .") mean the text was probably not
// detokenised (13a then splits it again, and the score is not comparable). Returns the warning,
// or "" when there is none (or with tokenize none).
std::string tokenized_text_warning(const std::vector<std::string>& hypotheses, BleuTokenize tokenize);

BleuTokenize parse_bleu_tokenize(const std::string& name);  // "13a" or "none"; else an Error naming them
const char* bleu_tokenize_name(BleuTokenize tokenize);

// Files are read with read_text_lines (translation/corpus.h).

}  // namespace qkgrad::translation
