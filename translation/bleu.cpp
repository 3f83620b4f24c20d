// sacreBLEU-compatible BLEU and chrF (see bleu.h for the formulas).
//
// The file reads top to bottom in four parts:
//   1. UTF-8 and whitespace: validity checks, and the whitespace Python's str.split() uses.
//   2. The 13a tokenizer: sacreBLEU's regular expressions, each written as a character loop.
//   3. BLEU: n-gram counting, clipped matches, and the score from the corpus statistics.
//   4. chrF: character n-grams and the F-score averaged over orders.
//
// Where sacreBLEU's Python evaluates a formula in a particular order, the code here uses the
// same order, so the doubles come out the same.
#include "translation/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <unordered_map>

#include <locale.h>
#include <wctype.h>

#include "core/error.h"
#include "io/text.h"

namespace qkgrad::translation {

namespace {

constexpr int kBleuOrder = 4;  // BLEU counts n-grams for n = 1..4
constexpr int kChrfOrder = 6;  // chrF counts character n-grams for n = 1..6
constexpr double kChrfBeta = 2.0;

// ------------------------------------------------------------------------------------------
// 1. UTF-8 and whitespace
// ------------------------------------------------------------------------------------------

// Throws an Error if `line` is not valid UTF-8. `what` names the line, e.g. "reference line 7".
void check_utf8(std::string_view line, const std::string& where, const std::string& what) {
  const std::size_t bad = first_invalid_utf8(line);
  if (bad == std::string_view::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned>(byte_at(line, bad)));
  fail(cat(where, ": ", what, " is not valid UTF-8 (byte ", byte, " at byte offset ", bad,
           "); convert the text to UTF-8 first (e.g. iconv -f latin1 -t utf-8)"));
}

// If a whitespace character (one that Python's str.split() splits on: is_python_space in
// io/text.h) starts at text[i], its length in bytes; otherwise 0.
std::size_t whitespace_length(std::string_view text, std::size_t i) {
  char32_t cp = 0;
  const std::size_t length = decode_utf8(text, i, cp);
  return length > 0 && is_python_space(cp) ? length : 0;
}

// Offset of the character after the one starting at text[i] (skips its continuation bytes).
std::size_t next_char(std::string_view text, std::size_t i) {
  ++i;
  while (i < text.size() && is_continuation_byte(byte_at(text, i))) ++i;
  return i;
}

// The words of `text` split on runs of whitespace, like Python's str.split(). The views point
// into `text`.
std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0, word_start = 0;
  bool in_word = false;
  while (i < text.size()) {
    const std::size_t space = whitespace_length(text, i);
    if (space > 0 && in_word) words.push_back(text.substr(word_start, i - word_start));
    if (space == 0 && !in_word) word_start = i;
    in_word = space == 0;
    i = space > 0 ? i + space : next_char(text, i);
  }
  if (in_word) words.push_back(text.substr(word_start));
  return words;
}

// `text` without its trailing whitespace, like Python's str.rstrip().
std::string_view strip_trailing_whitespace(std::string_view text) {
  std::size_t content_end = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t space = whitespace_length(text, i);
    i = space > 0 ? i + space : next_char(text, i);
    if (space == 0) content_end = i;
  }
  return text.substr(0, content_end);
}

// `text` with all whitespace removed, like Python's ''.join(text.split()).
std::string remove_whitespace(std::string_view text) {
  std::string out;
  for (std::string_view word : split_words(text)) out += word;
  return out;
}

// ------------------------------------------------------------------------------------------
// 2. The 13a tokenizer
// ------------------------------------------------------------------------------------------

// Every occurrence of `from` replaced by `to`, scanning left to right without overlaps, like
// Python's str.replace.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t hit = text.find(from); hit != std::string_view::npos;
       hit = text.find(from, start)) {
    out.append(text.substr(start, hit - start));
    out.append(to);
    start = hit + from.size();
  }
  out.append(text.substr(start));
  return out;
}

// The language-independent part of 13a: drop "<skipped>" markers, rejoin words hyphenated
// across lines, turn line breaks into spaces, and unescape the four HTML entities mteval knows
// (in this order, so "&amp;lt;" becomes "<").
std::string clean_markup(std::string_view line) {
  std::string text = replace_all(line, "<skipped>", "");
  text = replace_all(text, "-\n", "");
  text = replace_all(text, "\n", " ");
  text = replace_all(text, "&quot;", "\"");
  text = replace_all(text, "&amp;", "&");
  text = replace_all(text, "&lt;", "<");
  text = replace_all(text, "&gt;", ">");
  return text;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

// The characters 13a always splits off: sacreBLEU's class [\{-\~\[-\` -\&\(-\+\:-\@\/], that is
// { | } ~  [ \ ] ^ _ `  space ! " # $ % &  ( ) * +  : ; < = > ? @  and /.
// Not in it: the apostrophe, the hyphen, the period and the comma (handled by the rules below).
bool is_13a_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// Rule 1: a space on both sides of every symbol.
std::string space_symbols(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) {
    if (is_13a_symbol(c)) {
      out += ' ';
      out += c;
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// One pass of a regular-expression substitution whose pattern is exactly two characters, as
// Python's re.sub runs it: scan left to right; where `matches(a, b)` holds, write `rewrite(a, b)`
// and continue after b (matches never overlap); elsewhere copy the character. Working on bytes
// gives the same result as working on code points: one side of every pattern is an ASCII
// character, which never occurs inside a multi-byte UTF-8 character, so a match always lies on
// a character boundary (and the other side, "not a digit", is equally true of any byte of a
// multi-byte character).
template <typename Matches, typename Rewrite>
std::string substitute_pairs(std::string_view text, Matches matches, Rewrite rewrite) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  std::size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && matches(text[i], text[i + 1])) {
      out += rewrite(text[i], text[i + 1]);
      i += 2;
    } else {
      out += text[i];
      i += 1;
    }
  }
  return out;
}

// Rule 2, ([^0-9])([\.,]) -> "\1 \2 ": split a period or comma off what precedes it, unless
// that is a digit.
std::string split_period_after_non_digit(std::string_view text) {
  return substitute_pairs(
      text, [](char a, char b) { return !is_digit(a) && is_period_or_comma(b); },
      [](char a, char b) { return std::string{a, ' ', b, ' '}; });
}

// Rule 3, ([\.,])([^0-9]) -> " \1 \2": split a period or comma off what follows it, unless that
// is a digit. Together with rule 2 this keeps "3.14" and "1,000" whole.
std::string split_period_before_non_digit(std::string_view text) {
  return substitute_pairs(
      text, [](char a, char b) { return is_period_or_comma(a) && !is_digit(b); },
      [](char a, char b) { return std::string{' ', a, ' ', b}; });
}

// Rule 4, ([0-9])(-) -> "\1 \2 ": split a hyphen off a digit before it ("1990-2000").
std::string split_dash_after_digit(std::string_view text) {
  return substitute_pairs(
      text, [](char a, char b) { return is_digit(a) && b == '-'; },
      [](char a, char b) { return std::string{a, ' ', b, ' '}; });
}

// ------------------------------------------------------------------------------------------
// 3. BLEU
// ------------------------------------------------------------------------------------------

// Counts of n-grams (or character n-grams). The keys are views into the text they came from.
using NgramCounts = std::unordered_map<std::string_view, int64_t>;

// The text of words[first .. first + n - 1]. The words must be views into one string in which
// they are separated by exactly one space, so equal n-grams give equal views.
std::string_view word_ngram(const std::vector<std::string_view>& words, std::size_t first,
                            std::size_t n) {
  const std::string_view last = words[first + n - 1];
  const std::size_t length =
      static_cast<std::size_t>(last.data() + last.size() - words[first].data());
  return {words[first].data(), length};
}

NgramCounts count_word_ngrams(const std::vector<std::string_view>& words, std::size_t n) {
  NgramCounts counts;
  for (std::size_t i = 0; i + n <= words.size(); ++i) ++counts[word_ngram(words, i, n)];
  return counts;
}

// Sum over hypothesis n-grams of min(count in hypothesis, count in reference).
int64_t clipped_matches(const NgramCounts& hyp, const NgramCounts& ref) {
  int64_t matches = 0;
  for (const auto& [ngram, count] : hyp) {
    const auto found = ref.find(ngram);
    if (found != ref.end()) matches += std::min(count, found->second);
  }
  return matches;
}

int64_t total_count(const NgramCounts& counts) {
  int64_t total = 0;
  for (const auto& entry : counts) total += entry.second;
  return total;
}

// A line as BLEU sees it: trailing whitespace stripped (sacreBLEU does this before
// tokenizing), tokenized, and with its words separated by single spaces.
std::string bleu_words(std::string_view line, BleuTokenize tokenize) {
  const std::string_view stripped = strip_trailing_whitespace(line);
  if (tokenize == BleuTokenize::t13a) return tokenize_13a(stripped);
  return join(split_words(stripped), " ");
}

// The references of segment i that sacreBLEU scores against: the non-empty ones, or, when all
// are empty, one empty reference (whose hypothesis's n-grams then match nothing).
std::vector<std::string_view> segment_references(const ReferenceStreams& references, std::size_t i) {
  std::vector<std::string_view> refs;
  for (const auto& stream : references) {
    if (!stream[i].empty()) refs.push_back(stream[i]);
  }
  if (refs.empty()) refs.push_back(std::string_view());
  return refs;
}

// One segment's contribution to the corpus statistics, against one or more references: each
// hypothesis n-gram is clipped by its largest count in any one reference, and the reference
// length is the one closest to the hypothesis's (the shorter of two equally close), as in
// sacreBLEU.
BleuStats segment_bleu_stats(std::string_view hypothesis, const std::vector<std::string_view>& references,
                             BleuTokenize tokenize) {
  const std::string hyp_text = bleu_words(hypothesis, tokenize);
  const std::vector<std::string_view> hyp = split_words(hyp_text);
  std::vector<std::string> ref_texts;
  for (std::string_view r : references) ref_texts.push_back(bleu_words(r, tokenize));
  BleuStats stats;
  stats.hyp_len = static_cast<int64_t>(hyp.size());
  int64_t closest_diff = -1;
  std::vector<std::vector<std::string_view>> refs;
  for (const std::string& text : ref_texts) {
    refs.push_back(split_words(text));
    const auto len = static_cast<int64_t>(refs.back().size());
    const int64_t diff = std::abs(stats.hyp_len - len);
    if (closest_diff < 0 || diff < closest_diff || (diff == closest_diff && len < stats.ref_len)) {
      closest_diff = diff;
      stats.ref_len = len;
    }
  }
  for (int n = 1; n <= kBleuOrder; ++n) {
    const NgramCounts hyp_ngrams = count_word_ngrams(hyp, static_cast<std::size_t>(n));
    NgramCounts ref_ngrams;  // the largest count of each n-gram in any one reference
    for (const auto& ref : refs) {
      for (const auto& [ngram, count] : count_word_ngrams(ref, static_cast<std::size_t>(n))) {
        int64_t& most = ref_ngrams[ngram];
        most = std::max(most, count);
      }
    }
    stats.total[n - 1] = total_count(hyp_ngrams);
    stats.correct[n - 1] = clipped_matches(hyp_ngrams, ref_ngrams);
  }
  return stats;
}

// The checks both corpus metrics make before scoring: at least one pair and one reference
// stream, every stream as long as the hypotheses, UTF-8 everywhere. An empty reference is scored
// as sacreBLEU 2.6 scores it: its hypothesis's words count in the totals and match nothing; its
// length adds nothing.
void check_corpus(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                  const std::string& where) {
  QKGRAD_CHECK(!hypotheses.empty(), where, ": no hypotheses to score (the corpus is empty)");
  QKGRAD_CHECK(!references.empty(), where, ": no references to score against");
  for (std::size_t r = 0; r < references.size(); ++r) {
    const std::string which = references.size() == 1 ? "reference" : cat("reference ", r + 1);
    QKGRAD_CHECK(hypotheses.size() == references[r].size(), where, ": ", hypotheses.size(),
                 " hypothesis lines but ", references[r].size(), " ", which,
                 " lines; give exactly one reference line per hypothesis line");
    for (std::size_t i = 0; i < hypotheses.size(); ++i) {
      check_utf8(references[r][i], where, cat(which, " line ", i + 1));
    }
  }
  for (std::size_t i = 0; i < hypotheses.size(); ++i) check_utf8(hypotheses[i], where, cat("hypothesis line ", i + 1));
}

// The lines as the metrics see them: lowercased first with --lowercase (sacreBLEU lowercases
// before it tokenizes).
std::vector<std::string> prepared(const std::vector<std::string>& lines, const ScoringOptions& options) {
  if (!options.lowercase) return lines;
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (const std::string& line : lines) out.push_back(lowercase_utf8(line));
  return out;
}
ReferenceStreams prepared(const ReferenceStreams& streams, const ScoringOptions& options) {
  ReferenceStreams out;
  for (const auto& stream : streams) out.push_back(prepared(stream, options));
  return out;
}

// exp(1 - ref_len / hyp_len) when the hypotheses are shorter than the references, else 1;
// 0 when the hypotheses have no words at all.
double brevity_penalty(int64_t hyp_len, int64_t ref_len) {
  if (hyp_len >= ref_len) return 1.0;
  if (hyp_len == 0) return 0.0;
  return std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(hyp_len));
}

// The n-gram precisions in percent with sacreBLEU's 'exp' smoothing: the k-th order without
// matches gets 100 / (2^k · total). An order without any hypothesis n-grams, and every order
// after it, keeps precision 0 (sacreBLEU stops there), which makes the score 0 unless the
// effective order is used. Returns the effective order: the orders before that stop.
int smoothed_precisions(const BleuStats& stats, double precision[kBleuOrder]) {
  double smoothing = 1.0;
  int effective_order = 0;
  for (int n = 0; n < kBleuOrder; ++n) {
    const double total = static_cast<double>(stats.total[n]);
    if (stats.total[n] == 0) break;
    effective_order = n + 1;
    if (stats.correct[n] == 0) {
      smoothing *= 2.0;
      precision[n] = 100.0 / (smoothing * total);
    } else {
      precision[n] = 100.0 * static_cast<double>(stats.correct[n]) / total;
    }
  }
  return effective_order;
}

// sacreBLEU's log that maps 0 to -9999999999 (so exp of the mean is 0 instead of an error).
double floored_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

// The sum of `values` as Python's built-in sum() computes it since Python 3.12: Neumaier's
// compensated summation, which carries the rounding error of each addition in `compensation`
// and adds it back at the end. (A plain loop can differ in the last bit; Python 3.11 and older
// sum plainly, so their sacreBLEU scores can differ from these by that much.)
double python_sum(const double* values, int count) {
  double sum = 0.0, compensation = 0.0;
  for (int k = 0; k < count; ++k) {
    const double x = values[k];
    const double t = sum + x;
    compensation += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  if (compensation != 0.0 && std::isfinite(compensation)) sum += compensation;
  return sum;
}

bool any_match(const BleuStats& stats) {
  for (int64_t c : stats.correct) {
    if (c != 0) return true;
  }
  return false;
}

// printf-style fixed-point text of `value` with `digits` decimals; like Python's f"{x:.2f}",
// glibc rounds the exact binary value to nearest (ties to even).
std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

// ------------------------------------------------------------------------------------------
// 4. chrF
// ------------------------------------------------------------------------------------------

// Per order n = 1..6: character n-grams in the hypotheses, in the references, and matched.
struct ChrfStats {
  int64_t hyp[kChrfOrder] = {};
  int64_t ref[kChrfOrder] = {};
  int64_t match[kChrfOrder] = {};
};

// Byte offsets of the characters of `text`, plus text.size() at the end, so character k spans
// [starts[k], starts[k + 1]).
std::vector<std::size_t> char_starts(std::string_view text) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < text.size(); i = next_char(text, i)) starts.push_back(i);
  starts.push_back(text.size());
  return starts;
}

NgramCounts count_char_ngrams(std::string_view text, const std::vector<std::size_t>& starts,
                              std::size_t n) {
  NgramCounts counts;
  const std::size_t chars = starts.size() - 1;
  for (std::size_t k = 0; k + n <= chars; ++k) {
    ++counts[text.substr(starts[k], starts[k + n] - starts[k])];
  }
  return counts;
}

// One segment's character n-gram statistics. Whitespace is removed first. As in sacreBLEU, a
// hypothesis's n-grams of an order the reference is too short for are not counted.
ChrfStats segment_chrf_stats(std::string_view hypothesis, std::string_view reference) {
  ChrfStats stats;
  const std::string hyp = remove_whitespace(hypothesis);
  const std::string ref = remove_whitespace(reference);
  const std::vector<std::size_t> hyp_starts = char_starts(hyp);
  const std::vector<std::size_t> ref_starts = char_starts(ref);
  for (int n = 1; n <= kChrfOrder; ++n) {
    const NgramCounts hyp_ngrams = count_char_ngrams(hyp, hyp_starts, static_cast<std::size_t>(n));
    const NgramCounts ref_ngrams = count_char_ngrams(ref, ref_starts, static_cast<std::size_t>(n));
    stats.hyp[n - 1] = ref_ngrams.empty() ? 0 : total_count(hyp_ngrams);
    stats.ref[n - 1] = total_count(ref_ngrams);
    stats.match[n - 1] = clipped_matches(hyp_ngrams, ref_ngrams);
  }
  return stats;
}

ChrfStats& operator+=(ChrfStats& a, const ChrfStats& b) {
  for (int n = 0; n < kChrfOrder; ++n) a.hyp[n] += b.hyp[n], a.ref[n] += b.ref[n], a.match[n] += b.match[n];
  return a;
}

// chrF from corpus statistics: average precision and recall over the orders both sides have
// ("effective order", sacreBLEU's default without eps smoothing), then the F-beta score.
double chrf_from_stats(const ChrfStats& stats) {
  double avg_precision = 0.0, avg_recall = 0.0;
  int effective_order = 0;
  for (int n = 0; n < kChrfOrder; ++n) {
    if (stats.hyp[n] > 0 && stats.ref[n] > 0) {
      avg_precision += static_cast<double>(stats.match[n]) / static_cast<double>(stats.hyp[n]);
      avg_recall += static_cast<double>(stats.match[n]) / static_cast<double>(stats.ref[n]);
      ++effective_order;
    }
  }
  if (effective_order > 0) {
    avg_precision /= effective_order;
    avg_recall /= effective_order;
  }
  if (avg_precision + avg_recall == 0.0) return 0.0;
  const double factor = kChrfBeta * kChrfBeta;
  const double f = (1.0 + factor) * avg_precision * avg_recall /
                   (factor * avg_precision + avg_recall);
  return 100.0 * f;
}

// A segment's chrF statistics against several references: those of the reference that gives
// the segment the highest chrF (the first of equals), as sacreBLEU chooses.
ChrfStats best_segment_chrf_stats(std::string_view hypothesis, const std::vector<std::string_view>& references) {
  ChrfStats best;
  double best_f = -1.0;
  for (std::string_view ref : references) {
    const ChrfStats stats = segment_chrf_stats(hypothesis, ref);
    const double f = chrf_from_stats(stats);
    if (f > best_f) best = stats, best_f = f;
  }
  return best;
}


}  // namespace

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  hyp_len += other.hyp_len;
  ref_len += other.ref_len;
  for (int n = 0; n < kBleuOrder; ++n) {
    correct[n] += other.correct[n];
    total[n] += other.total[n];
  }
  return *this;
}

std::string BleuScore::verbose() const {
  std::string out;
  for (int n = 0; n < kBleuOrder; ++n) {
    if (n > 0) out += "/";
    out += fixed(precision[n], 1);
  }
  return cat(out, " (BP = ", fixed(brevity_penalty, 3), " ratio = ", fixed(ratio, 3), " hyp_len = ", hyp_len,
             " ref_len = ", ref_len, ")");
}

std::string BleuScore::format() const { return "BLEU = " + fixed(score, 2) + " " + verbose(); }

std::string tokenize_13a(std::string_view line) {
  std::string text = " ";  // sacreBLEU pads the line with a space on each side
  text += clean_markup(line);
  text += ' ';
  text = space_symbols(text);
  text = split_period_after_non_digit(text);
  text = split_period_before_non_digit(text);
  text = split_dash_after_digit(text);
  return join(split_words(text), " ");
}

std::vector<BleuStats> segment_bleu_stats(const std::vector<std::string>& hypotheses,
                                          const ReferenceStreams& references, const ScoringOptions& options) {
  check_corpus(hypotheses, references, "BLEU");
  const std::vector<std::string> hyps = prepared(hypotheses, options);
  const ReferenceStreams refs = prepared(references, options);
  std::vector<BleuStats> stats;
  stats.reserve(hyps.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    stats.push_back(segment_bleu_stats(hyps[i], segment_references(refs, i), options.tokenize));
  }
  return stats;
}

BleuStats corpus_bleu_stats(const std::vector<std::string>& hypotheses,
                            const std::vector<std::string>& references, BleuTokenize tokenize) {
  BleuStats sum;
  for (const BleuStats& s : segment_bleu_stats(hypotheses, {references}, ScoringOptions{tokenize, false})) sum += s;
  return sum;
}

BleuScore bleu_from_stats(const BleuStats& stats, bool effective_order) {
  BleuScore result;
  result.hyp_len = stats.hyp_len;
  result.ref_len = stats.ref_len;
  result.brevity_penalty = brevity_penalty(stats.hyp_len, stats.ref_len);
  result.ratio = stats.ref_len > 0
                     ? static_cast<double>(stats.hyp_len) / static_cast<double>(stats.ref_len)
                     : 0.0;
  if (!any_match(stats)) return result;  // score 0, precisions reported as 0 (sacreBLEU #141)
  const int orders_seen = smoothed_precisions(stats, result.precision);
  const int order = effective_order && orders_seen > 0 ? orders_seen : kBleuOrder;
  double logs[kBleuOrder];
  for (int n = 0; n < order; ++n) logs[n] = floored_log(result.precision[n]);
  result.score = result.brevity_penalty * std::exp(python_sum(logs, order) / order);
  // A perfect match gives exp(log 100) = 100.00000000000004 in doubles (in sacreBLEU too); BLEU
  // is at most 100, so that last-bit excess is cut off (found by fuzz/fuzz_bleu.cpp).
  result.score = std::min(result.score, 100.0);
  return result;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                      const ScoringOptions& options) {
  BleuStats sum;
  for (const BleuStats& s : segment_bleu_stats(hypotheses, references, options)) sum += s;
  return bleu_from_stats(sum);
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references, BleuTokenize tokenize) {
  return corpus_bleu(hypotheses, ReferenceStreams{references}, ScoringOptions{tokenize, false});
}

std::vector<BleuScore> sentence_bleu(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                                     const ScoringOptions& options) {
  std::vector<BleuScore> scores;
  for (const BleuStats& s : segment_bleu_stats(hypotheses, references, options)) scores.push_back(bleu_from_stats(s, true));
  return scores;
}

namespace {

// Each segment's chrF statistics (against its best reference).
std::vector<ChrfStats> segment_chrf_stats(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                                          const ScoringOptions& options) {
  check_corpus(hypotheses, references, "chrF");
  const std::vector<std::string> hyps = prepared(hypotheses, options);
  const ReferenceStreams refs = prepared(references, options);
  std::vector<ChrfStats> stats;
  stats.reserve(hyps.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) stats.push_back(best_segment_chrf_stats(hyps[i], segment_references(refs, i)));
  return stats;
}

}  // namespace

double corpus_chrf(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                   const ScoringOptions& options) {
  ChrfStats sum;
  for (const ChrfStats& s : segment_chrf_stats(hypotheses, references, options)) sum += s;
  return chrf_from_stats(sum);
}

double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  return corpus_chrf(hypotheses, ReferenceStreams{references}, ScoringOptions{});
}

std::vector<double> sentence_chrf(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                                  const ScoringOptions& options) {
  std::vector<double> scores;
  for (const ChrfStats& s : segment_chrf_stats(hypotheses, references, options)) scores.push_back(chrf_from_stats(s));
  return scores;
}

std::string reference_count(const ReferenceStreams& references) {
  if (references.empty() || references.front().empty()) return std::to_string(references.size());
  std::size_t first = 0;
  for (std::size_t i = 0; i < references.front().size(); ++i) {
    const std::size_t n = std::max<std::size_t>(1, static_cast<std::size_t>(std::count_if(
                                                       references.begin(), references.end(),
                                                       [&](const auto& stream) { return !stream[i].empty(); })));
    if (i == 0) first = n;
    if (n != first) return "var";
  }
  return std::to_string(first);
}

std::string bleu_signature(const ScoringOptions& options, const std::string& nrefs, bool effective_order) {
  return cat("nrefs:", nrefs, "|case:", options.lowercase ? "lc" : "mixed", "|eff:", effective_order ? "yes" : "no",
             "|tok:", bleu_tokenize_name(options.tokenize), "|smooth:exp|version:qkgrad-", QKGRAD_VERSION);
}

std::string chrf_signature(const ScoringOptions& options, const std::string& nrefs) {
  return cat("nrefs:", nrefs, "|case:", options.lowercase ? "lc" : "mixed", "|eff:yes|nc:6|nw:0|space:no|version:qkgrad-",
             QKGRAD_VERSION);
}

std::string bleu_signature(BleuTokenize tokenize) { return bleu_signature(ScoringOptions{tokenize, false}, "1", false); }

std::string chrf_signature() { return chrf_signature(ScoringOptions{}, "1"); }

std::string tokenized_text_warning(const std::vector<std::string>& hypotheses, BleuTokenize tokenize) {
  if (tokenize == BleuTokenize::none) return "";
  int64_t tokenized = 0;
  for (const std::string& h : hypotheses) tokenized += h.size() >= 2 && h.compare(h.size() - 2, 2, " .") == 0;
  if (tokenized <= 100) return "";
  return std::to_string(tokenized) +
         " lines end in a tokenised period (' .'): the text looks tokenised, and the 13a tokeniser splits it again, so "
         "the score is not comparable to published detokenised BLEU. Detokenise both sides, or score tokenised text "
         "with --tokenize none (as sacreBLEU warns too)";
}

std::string lowercase_utf8(std::string_view text) {
  // glibc's Unicode case table (C.UTF-8 is built into glibc 2.35 and later); plain ASCII if absent.
  static const locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  auto is_letter = [](char32_t c) {
    return utf8 ? ::iswalpha_l(static_cast<wint_t>(c), utf8) != 0 : c < 0x80 && std::isalpha(static_cast<int>(c)) != 0;
  };
  std::string out;
  out.reserve(text.size());
  char32_t previous = 0;
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t length = decode_utf8(text, i, cp);
    if (length == 0) {  // not UTF-8: the byte is kept (the scorers refuse such lines before this)
      out += text[i++];
      continue;
    }
    i += length;
    char32_t next = 0;
    if (i < text.size()) decode_utf8(text, i, next);
    if (cp == 0x130) {  // İ: Python's full mapping gives i + combining dot above
      append_utf8(out, U'i');
      append_utf8(out, 0x307);
    } else if (cp == 0x3A3) {  // Σ: final sigma ς after a letter and not before one, else σ
      append_utf8(out, is_letter(previous) && !is_letter(next) ? 0x3C2 : 0x3C3);
    } else if (cp < 0x80) {
      out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp);
    } else {
      append_utf8(out, utf8 ? static_cast<char32_t>(::towlower_l(static_cast<wint_t>(cp), utf8)) : cp);
    }
    previous = cp;
  }
  return out;
}

BleuTokenize parse_bleu_tokenize(const std::string& name) {
  if (name == "13a") return BleuTokenize::t13a;
  if (name == "none") return BleuTokenize::none;
  throw Error("BLEU tokenisation must be 13a or none, got '" + name + "'");
}

const char* bleu_tokenize_name(BleuTokenize tokenize) { return tokenize == BleuTokenize::none ? "none" : "13a"; }

}  // namespace qkgrad::translation
