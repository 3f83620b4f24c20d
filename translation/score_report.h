// How `bleu` and `eval` print scores: sacreBLEU 2.x's output forms, so scripts written for
// sacreBLEU read qkgrad's.
//
//   text (default), one line per metric, the signature in sacreBLEU's text form:
//     BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:qkgrad-0.1.0 = 33.24 64.9/40.5/26.6/17.8 (BP = ...)
//     chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:qkgrad-0.1.0 = 55.12
//   score only (sacreBLEU -b): the bare numbers, one line per metric.
//   json (sacreBLEU -f json): one object per metric (an array of them for two), with indent 1:
//     {"name": "BLEU", "score": 33.24, "signature": "nrefs:1|...", "verbose_score": "64.9/...",
//      "nrefs": "1", "case": "mixed", "eff": "no", "tok": "13a", "smooth": "exp", "version": "qkgrad-0.1.0"}
//
// Sentence level (sacreBLEU -sl): one metric, one line per hypothesis (BLEU with the effective
// order, eff:yes); in json, one compact object per line (JSON Lines).
#pragma once

#include <string>
#include <vector>

#include "translation/bleu.h"

namespace qkgrad::translation {

enum class ScoreFormat { text, json, score_only };

struct ReportOptions {
  ScoringOptions scoring;
  bool bleu = true;             // which metrics, in this order
  bool chrf = true;
  bool sentence_level = false;  // needs exactly one metric
  ScoreFormat format = ScoreFormat::text;
  int width = 2;                // decimals of the scores (the precisions keep one)
};

// The report, one or more lines each ending in '\n'. Throws qkgrad::Error for what the metrics
// refuse (bleu.h) and for sentence level with two metrics.
std::string score_report(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                         const ReportOptions& options);

ScoreFormat parse_score_format(const std::string& name);  // "text", "json" or "score"

}  // namespace qkgrad::translation
