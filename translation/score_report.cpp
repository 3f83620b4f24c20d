#include "translation/score_report.h"

#include <cstdio>

#include "core/error.h"
#include "io/json.h"

namespace qkgrad::translation {

namespace {

// One metric's score as sacreBLEU's Score.format() prints it.
struct MetricScore {
  std::string name;       // "BLEU" or "chrF2"
  double score = 0;
  std::string signature;  // "nrefs:1|case:mixed|..."
  std::string verbose;    // BLEU's precisions and lengths; "" for chrF
};

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string format(const MetricScore& m, const ReportOptions& o, bool compact_json) {
  const std::string score = fixed(m.score, o.width);
  if (o.format == ScoreFormat::score_only) return score;
  if (o.format == ScoreFormat::text) {
    return cat(m.name, "|", m.signature, " = ", score, m.verbose.empty() ? "" : " " + m.verbose);
  }
  Json j = Json::object();
  j["name"] = m.name;
  j["score"] = std::stod(score);  // rounded to the width, as sacreBLEU's float(f"{score:.{width}f}")
  j["signature"] = m.signature;
  if (!m.verbose.empty()) j["verbose_score"] = m.verbose;
  std::size_t start = 0;
  while (start < m.signature.size()) {  // each key:value of the signature as a field
    std::size_t end = m.signature.find('|', start);
    if (end == std::string::npos) end = m.signature.size();
    const std::string pair = m.signature.substr(start, end - start);
    const std::size_t colon = pair.find(':');
    j[pair.substr(0, colon)] = pair.substr(colon + 1);
    start = end + 1;
  }
  return compact_json ? j.dump() : j.dump(1);
}

MetricScore bleu_score(const BleuScore& b, const std::string& signature) {
  return {"BLEU", b.score, signature, b.verbose()};
}

}  // namespace

std::string score_report(const std::vector<std::string>& hypotheses, const ReferenceStreams& references,
                         const ReportOptions& o) {
  const std::string nrefs = reference_count(references);
  std::string out;
  if (o.sentence_level) {
    QKGRAD_CHECK(o.bleu != o.chrf, "sentence-level scores are one metric at a time (as in sacreBLEU): choose "
                                   "--metrics bleu or --metrics chrf");
    if (o.bleu) {
      const std::string sig = bleu_signature(o.scoring, nrefs, true);
      for (const BleuScore& b : sentence_bleu(hypotheses, references, o.scoring)) {
        out += format(bleu_score(b, sig), o, true) + "\n";
      }
    } else {
      const std::string sig = chrf_signature(o.scoring, nrefs);
      for (double c : sentence_chrf(hypotheses, references, o.scoring)) out += format({"chrF2", c, sig, ""}, o, true) + "\n";
    }
    return out;
  }
  std::vector<MetricScore> scores;
  if (o.bleu) {
    scores.push_back(bleu_score(corpus_bleu(hypotheses, references, o.scoring), bleu_signature(o.scoring, nrefs, false)));
  }
  if (o.chrf) scores.push_back({"chrF2", corpus_chrf(hypotheses, references, o.scoring), chrf_signature(o.scoring, nrefs), ""});
  if (o.format == ScoreFormat::json && scores.size() > 1) {  // sacreBLEU's list of the metrics' objects
    out = "[\n";
    for (std::size_t i = 0; i < scores.size(); ++i) out += format(scores[i], o, false) + (i + 1 < scores.size() ? ",\n" : "\n");
    return out + "]\n";
  }
  for (const MetricScore& m : scores) out += format(m, o, false) + "\n";
  return out;
}

ScoreFormat parse_score_format(const std::string& name) {
  if (name == "text") return ScoreFormat::text;
  if (name == "json") return ScoreFormat::json;
  if (name == "score") return ScoreFormat::score_only;
  throw Error("the score format must be text, json or score, got '" + name + "'");
}

}  // namespace qkgrad::translation
