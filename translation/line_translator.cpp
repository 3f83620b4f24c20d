#include "translation/line_translator.h"

#include <cstdio>

#include "core/error.h"
#include "io/text.h"

namespace qkgrad::translation {

std::vector<std::vector<ScoredHypothesis>> LineTranslator::translate(const std::vector<std::string>& lines,
                                                                     const std::string& name, int64_t first) {
  std::vector<std::vector<int64_t>> sources;
  std::vector<std::size_t> which;  // the line each source came from
  std::vector<int64_t> line_numbers;  // the same, numbered in the input (the samples' generators)
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string normalised = normalize_spaces(lines[i]);
    if (normalised.empty()) continue;
    sources.push_back(m_.subwords->encode(normalised));
    if (static_cast<int64_t>(sources.back().size()) > max_length_) {
      if (cropped_++ == 0) first_cropped_ = cat(name, ":", first + static_cast<int64_t>(i));
      sources.back().resize(max_length_);
    }
    which.push_back(i);
    line_numbers.push_back(first + static_cast<int64_t>(i));
  }
  auto translated = translate_all_nbest(m_.members(), sources, beam_, 2000, nullptr, line_numbers);
  std::vector<std::vector<ScoredHypothesis>> out(lines.size(), std::vector<ScoredHypothesis>{ScoredHypothesis{}});
  for (std::size_t k = 0; k < translated.size(); ++k) out[which[k]] = std::move(translated[k]);
  return out;
}

std::vector<std::string> LineTranslator::translate_best(const std::vector<std::string>& lines, const std::string& name,
                                                        int64_t first) {
  std::vector<std::string> best;
  for (const auto& hypotheses : translate(lines, name, first)) best.push_back(text(hypotheses.front()));
  return best;
}

std::string LineTranslator::text(const ScoredHypothesis& h) const { return m_.subwords->decode(h.tokens); }

void LineTranslator::report_crops() const {
  if (cropped_ == 0) return;
  std::fprintf(stderr, "note: cropped %ld line%s longer than --max-length %ld subwords to that length (the first: %s)\n",
               static_cast<long>(cropped_), cropped_ == 1 ? "" : "s", static_cast<long>(max_length_),
               first_cropped_.c_str());
}

}  // namespace qkgrad::translation
