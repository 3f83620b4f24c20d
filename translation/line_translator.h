// Translating lines of text with a trained model, one answer per input line, always (what
// `translate` and `eval` print): a line empty after whitespace normalisation gets one empty
// hypothesis, and a line longer than max_length subwords is cropped to its first max_length
// (as Marian's --max-length-crop: attention memory grows with the square of the length). The
// crops are counted, and report_crops() says how many (naming the first) on stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "translation/beam_search.h"
#include "translation/trained_model.h"

namespace qkgrad::translation {

class LineTranslator {
 public:
  LineTranslator(LoadedModel& model, BeamOptions beam, int64_t max_length)
      : m_(model), beam_(beam), max_length_(max_length) {}

  // Each line's hypotheses, best first. `name` and `first` (the 1-based line number of
  // lines[0] there) place the lines in the note about crops.
  std::vector<std::vector<ScoredHypothesis>> translate(const std::vector<std::string>& lines, const std::string& name,
                                                       int64_t first);
  // The best translation of each line, detokenised.
  std::vector<std::string> translate_best(const std::vector<std::string>& lines, const std::string& name, int64_t first);
  std::string text(const ScoredHypothesis& h) const;  // detokenised

  void report_crops() const;  // "note: cropped 2 lines longer than --max-length ..." (nothing if none)

 private:
  LoadedModel& m_;
  BeamOptions beam_;
  int64_t max_length_;
  int64_t cropped_ = 0;
  std::string first_cropped_;  // "FILE:LINE"
};

}  // namespace qkgrad::translation
