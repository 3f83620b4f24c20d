// plots/svg.h: line charts and heatmaps are well-formed standalone SVG, name every
// panel and series, escape text, survive NaN and empty inputs, use round ticks, draw one cell
// per value, and reject values that do not match their labels.
#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"
#include "plots/svg.h"

using namespace qkgrad;

using Catch::Matchers::Contains;

namespace {

// ---- A small XML well-formedness checker ---------------------------------------------------
// Enough of XML 1.0 for what we write: an optional declaration, comments, elements with
// quoted attributes (no duplicates), text, the five named entities and character references.
// xml_problem returns "" for a well-formed document, else what is wrong and where.

bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool is_name_char(char c) {
  return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Whether `text` is valid UTF-8 (no stray or missing continuation bytes, no overlong forms).
bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80           ? 1
                               : (lead >> 5) == 0x6  ? 2
                               : (lead >> 4) == 0xE  ? 3
                               : (lead >> 3) == 0x1E ? 4
                                                     : 0;
    if (length == 0 || i + length > text.size() || lead == 0xC0 || lead == 0xC1) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

class XmlChecker {
 public:
  explicit XmlChecker(std::string_view xml) : xml_(xml) {}

  std::string problem() {
    if (!valid_utf8(xml_)) return "not valid UTF-8";
    if (xml_.substr(0, 5) == "<?xml") {
      const std::size_t end = xml_.find("?>");
      if (end == std::string_view::npos) return "unterminated XML declaration";
      pos_ = end + 2;
    }
    while (pos_ < xml_.size()) {
      const std::string p = xml_[pos_] == '<' ? markup() : text();
      if (!p.empty()) return p + " at byte " + std::to_string(pos_);
    }
    if (!open_.empty()) return "element <" + open_.back() + "> is never closed";
    if (!root_closed_) return "no root element";
    return "";
  }

 private:
  std::string text() {
    const std::size_t end = std::min(xml_.find('<', pos_), xml_.size());
    const std::string_view content = xml_.substr(pos_, end - pos_);
    if (open_.empty()) {
      for (char c : content) {
        if (!is_space(c)) return "text outside the root element";
      }
    }
    if (content.find('>') != std::string_view::npos &&
        content.find("]]>") != std::string_view::npos)
      return "']]>' in text";
    pos_ = end;
    return references(content);
  }

  // Every '&' must start &amp; &lt; &gt; &quot; &apos; &#123; or &#x1F;.
  static std::string references(std::string_view content) {
    for (std::size_t i = content.find('&'); i != std::string_view::npos;
         i = content.find('&', i + 1)) {
      const std::size_t semicolon = content.find(';', i);
      const std::string_view name =
          semicolon == std::string_view::npos ? "" : content.substr(i + 1, semicolon - i - 1);
      if (!known_reference(name)) return "bare '&' in '" + std::string(content.substr(i, 12)) + "'";
    }
    return "";
  }

  // amp, lt, gt, quot, apos, #123 or #x1F.
  static bool known_reference(std::string_view name) {
    for (std::string_view entity : {"amp", "lt", "gt", "quot", "apos"}) {
      if (name == entity) return true;
    }
    if (name.empty() || name[0] != '#') return false;
    const bool hex = name.substr(0, 2) == "#x";
    const std::string_view digits = name.substr(hex ? 2 : 1);
    const auto is_digit = [hex](char c) {
      const auto u = static_cast<unsigned char>(c);
      return hex ? std::isxdigit(u) != 0 : std::isdigit(u) != 0;
    };
    return !digits.empty() && std::all_of(digits.begin(), digits.end(), is_digit);
  }

  std::string name(std::string& out) {
    if (pos_ >= xml_.size() || !is_name_start(xml_[pos_])) return "expected a name";
    const std::size_t start = pos_;
    while (pos_ < xml_.size() && is_name_char(xml_[pos_])) ++pos_;
    out = std::string(xml_.substr(start, pos_ - start));
    return "";
  }

  void skip_space() {
    while (pos_ < xml_.size() && is_space(xml_[pos_])) ++pos_;
  }

  std::string markup() {
    if (xml_.substr(pos_, 4) == "<!--") {
      const std::size_t end = xml_.find("-->", pos_ + 4);
      if (end == std::string_view::npos) return "unterminated comment";
      pos_ = end + 3;
      return "";
    }
    if (xml_.substr(pos_, 2) == "</") return end_tag();
    return start_tag();
  }

  std::string end_tag() {
    pos_ += 2;
    std::string tag;
    if (std::string p = name(tag); !p.empty()) return p;
    skip_space();
    if (pos_ >= xml_.size() || xml_[pos_] != '>') return "expected '>' after </" + tag;
    ++pos_;
    if (open_.empty() || open_.back() != tag)
      return "</" + tag + "> does not match the open element";
    open_.pop_back();
    if (open_.empty()) root_closed_ = true;
    return "";
  }

  std::string start_tag() {
    if (root_closed_) return "a second root element";
    ++pos_;
    std::string tag;
    if (std::string p = name(tag); !p.empty()) return p;
    std::set<std::string> attributes;
    while (true) {
      const std::size_t before = pos_;
      skip_space();
      if (pos_ >= xml_.size()) return "unterminated tag <" + tag;
      if (xml_.substr(pos_, 2) == "/>") {
        pos_ += 2;
        if (open_.empty()) root_closed_ = true;
        return "";
      }
      if (xml_[pos_] == '>') {
        ++pos_;
        open_.push_back(tag);
        return "";
      }
      if (pos_ == before) return "no space before an attribute of <" + tag;
      std::string attribute;
      if (std::string p = name(attribute); !p.empty()) return p + " (attribute of <" + tag + ">)";
      if (!attributes.insert(attribute).second) return "duplicate attribute " + attribute;
      skip_space();
      if (pos_ >= xml_.size() || xml_[pos_] != '=') return "expected '=' after " + attribute;
      ++pos_;
      skip_space();
      if (pos_ >= xml_.size() || (xml_[pos_] != '"' && xml_[pos_] != '\'')) return "unquoted value";
      const char quote = xml_[pos_++];
      const std::size_t end = xml_.find(quote, pos_);
      if (end == std::string_view::npos) return "unterminated value of " + attribute;
      const std::string_view value = xml_.substr(pos_, end - pos_);
      if (value.find('<') != std::string_view::npos) return "'<' in the value of " + attribute;
      if (std::string p = references(value); !p.empty()) return p;
      pos_ = end + 1;
    }
  }

  std::string_view xml_;
  std::size_t pos_ = 0;
  std::vector<std::string> open_;
  bool root_closed_ = false;
};

std::string xml_problem(std::string_view xml) { return XmlChecker(xml).problem(); }

// ---- Helpers -------------------------------------------------------------------------------

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

// The start tags "<tag ...>" of every `tag` element in `svg`, in order.
std::vector<std::string> start_tags(const std::string& svg, const std::string& tag) {
  std::vector<std::string> out;
  for (std::size_t i = svg.find("<" + tag + " "); i != std::string::npos;
       i = svg.find("<" + tag + " ", i + 1)) {
    out.push_back(svg.substr(i, svg.find('>', i) + 1 - i));
  }
  return out;
}

// The value of attribute `name` in a start tag, or "" when it has none.
std::string attribute(const std::string& start_tag, const std::string& name) {
  const std::size_t at = start_tag.find(" " + name + "=\"");
  if (at == std::string::npos) return "";
  const std::size_t begin = at + name.size() + 3;
  return start_tag.substr(begin, start_tag.find('"', begin) - begin);
}

// The texts of the <text class="`cls`" ...> elements, in order (without a tooltip <title>).
std::vector<std::string> texts_of_class(const std::string& svg, const std::string& cls) {
  std::vector<std::string> out;
  const std::string marker = " class=\"" + cls + "\"";
  for (std::size_t i = svg.find("<text "); i != std::string::npos; i = svg.find("<text ", i + 1)) {
    const std::size_t tag_end = svg.find('>', i);
    if (svg.substr(i, tag_end - i).find(marker) == std::string::npos) continue;
    std::size_t begin = tag_end + 1;
    if (svg.compare(begin, 7, "<title>") == 0) begin = svg.find("</title>", begin) + 8;
    out.push_back(svg.substr(begin, svg.find('<', begin) - begin));
  }
  return out;
}

// `step` snapped to the nearest 1, 2 or 5 times a power of ten, or 0 when it is not within
// 1e-6 (relative) of one.
double round_step(double step) {
  if (!(step > 0)) return 0;
  const double power = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (std::abs(step / power - m) < 1e-6) return m * power;
  }
  return 0;
}

// Checks that `ticks` are evenly spaced multiples of a round step.
void check_round_ticks(const std::vector<double>& ticks) {
  REQUIRE(ticks.size() >= 2);
  const double step = round_step(ticks[1] - ticks[0]);
  INFO("step " << ticks[1] - ticks[0]);
  REQUIRE(step != 0);
  for (std::size_t i = 0; i < ticks.size(); ++i) {
    INFO("tick " << ticks[i]);
    const double k = ticks[i] / step;  // must be a whole number, up to rounding
    CHECK(std::abs(k - std::round(k)) < 1e-6 + 1e-9 * std::abs(k));
    if (i > 0) CHECK(std::abs(ticks[i] - ticks[i - 1] - step) <= 1e-6 * step);
  }
}

// The tick labels of one axis ("xtick" or "ytick") of a chart, parsed back into numbers.
std::vector<double> tick_values(const std::string& svg, const std::string& axis) {
  std::vector<double> values;
  for (const std::string& label : texts_of_class(svg, axis)) values.push_back(std::stod(label));
  return values;
}

// Training curves like the translation program's: losses, BLEU, and the QKNorm gain g of 12
// attention modules.
std::vector<svg::Panel> training_panels() {
  svg::Series train{"train", {}}, dev{"dev", {}}, bleu{"BLEU", {}};
  for (int step = 0; step <= 3000; step += 10) {
    train.points.emplace_back(step, 9.0 * std::exp(-step / 800.0) + 1.7 + 0.1 * std::sin(step));
  }
  for (int step = 500; step <= 3000; step += 500) {
    dev.points.emplace_back(step, 9.0 * std::exp(-step / 800.0) + 2.0);
    bleu.points.emplace_back(step, 30.0 * (1 - std::exp(-step / 1000.0)));
  }
  svg::Panel gains{"QKNorm gain g", "step", "g", {}};
  const std::vector<std::string> kinds = {"encoder self", "decoder self", "decoder cross"};
  for (int layer = 0; layer < 4; ++layer) {
    for (const std::string& kind : kinds) {
      svg::Series s{kind + " " + std::to_string(layer), {}};
      for (int step = 0; step <= 3000; step += 100) {
        s.points.emplace_back(step, 10 + (layer + 1) * 0.8 * std::log1p(step / 300.0) +
                                        static_cast<double>(s.name.size() % 5));
      }
      gains.series.push_back(s);
    }
  }
  return {svg::Panel{"train loss", "step", "loss", {train}},
          svg::Panel{"dev loss", "step", "loss", {dev}},
          svg::Panel{"dev BLEU", "step", "BLEU", {bleu}}, gains};
}

// An attention map over `n` tokens that contain characters XML must escape.
svg::Heatmap attention(const std::string& title, std::size_t rows, std::size_t columns) {
  const std::vector<std::string> tokens = {
      "\xE2\x96\x81"
      "el",
      "<unk>",
      "R&D",
      "\"quoted\"",
      "it's",
      "\xE2\x96\x81"
      "gato",
      "</s>",
      "a_very_long_subword_token"};
  svg::Heatmap map{title, {}, {}, {}};
  for (std::size_t i = 0; i < rows; ++i) map.row_labels.push_back(tokens[i % tokens.size()]);
  for (std::size_t j = 0; j < columns; ++j)
    map.column_labels.push_back(tokens[(j + 3) % tokens.size()]);
  for (std::size_t i = 0; i < rows; ++i) {
    std::vector<double> row(columns);
    double total = 0;
    for (std::size_t j = 0; j < columns; ++j)
      total += row[j] = std::exp(-std::abs(double(i) - double(j)));
    for (double& v : row) v /= total;
    map.values.push_back(row);
  }
  return map;
}

}  // namespace

// ---- The checker itself --------------------------------------------------------------------

TEST_CASE("svg: the test's XML checker accepts good XML and rejects bad XML", "[svg]") {
  CHECK(xml_problem(
            "<?xml version=\"1.0\"?>\n<a x=\"1\" y='&lt;'><b/>t &amp; &#x41;<!-- c --></a>\n") ==
        "");
  CHECK(xml_problem("<a><b></a></b>") != "");
  CHECK(xml_problem("<a>x & y</a>") != "");
  CHECK(xml_problem("<a x=\"<\"/>") != "");
  CHECK(xml_problem("<a x=\"1\" x=\"2\"/>") != "");
  CHECK(xml_problem("<a/><b/>") != "");
  CHECK(xml_problem("<a>") != "");
  CHECK(xml_problem("<a>\xff</a>") != "");
  CHECK(xml_problem("text") != "");
}

// ---- Building blocks -----------------------------------------------------------------------

TEST_CASE("svg: escape_xml escapes markup and replaces what XML cannot hold", "[svg]") {
  CHECK(svg::escape_xml("a < b && c > \"d\" 'e'") ==
        "a &lt; b &amp;&amp; c &gt; &quot;d&quot; &apos;e&apos;");
  CHECK(svg::escape_xml("\xE2\x96\x81"
                        "el") ==
        "\xE2\x96\x81"
        "el");                                                       // UTF-8 passes through
  CHECK(svg::escape_xml("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");  // so does an emoji
  CHECK(svg::escape_xml("a\xff"
                        "b") ==
        "a\xEF\xBF\xBD"
        "b");                                                        // invalid byte
  CHECK(svg::escape_xml("\xE2\x96") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // truncated sequence
  CHECK(svg::escape_xml("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  CHECK(svg::escape_xml(std::string("x\0y\x01", 4)) == "x\xEF\xBF\xBDy\xEF\xBF\xBD");  // controls
  CHECK(svg::escape_xml("tab\tand\nnewline") == "tab\tand\nnewline");
  CHECK(svg::escape_xml("") == "");
}

TEST_CASE("svg: nice_ticks gives evenly spaced round ticks covering the range", "[svg]") {
  const std::vector<std::pair<double, double>> ranges = {
      {0, 1},     {0, 3000},        {1.7, 10.7},     {-3.2, 4.9},
      {0.3, 0.7}, {2.06, 2.14},     {0, 1e-7},       {1e6, 2.5e6},
      {-1e-3, 0}, {123456, 123457}, {0, 0},          {5, 5},
      {-7, -7},   {1e-12, 1e-12},   {-1e300, 1e300}, {0.1, 0.30000000000000004}};
  for (const auto& [lo, hi] : ranges) {
    INFO("range [" << lo << ", " << hi << "]");
    const std::vector<double> ticks = svg::nice_ticks(lo, hi, 5);
    check_round_ticks(ticks);
    CHECK(ticks.front() <= lo + 1e-9 * std::abs(lo));
    CHECK(ticks.back() >= hi - 1e-9 * std::abs(hi));
    CHECK(ticks.size() <= 10);
  }
  CHECK(svg::nice_ticks(0, 1, 6) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  CHECK(svg::nice_ticks(0, 3000, 6) == std::vector<double>{0, 500, 1000, 1500, 2000, 2500, 3000});
  CHECK(svg::nice_ticks(0, 3000, 4) == std::vector<double>{0, 1000, 2000, 3000});
  CHECK_THROWS_AS(svg::nice_ticks(1, 0), Error);
  CHECK_THROWS_AS(svg::nice_ticks(0, std::numeric_limits<double>::infinity()), Error);
  CHECK_THROWS_AS(svg::nice_ticks(0, 1, 1), Error);
}

// ---- Line charts ---------------------------------------------------------------------------

TEST_CASE("svg: line_charts is a standalone SVG naming every panel and series", "[svg]") {
  const std::vector<svg::Panel> panels = training_panels();
  const std::string chart = svg::line_charts("run 7: QKNorm, IWSLT'14 de-en", panels);
  INFO(chart.substr(0, 600));
  CHECK(xml_problem(chart) == "");
  CHECK(chart.rfind(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"",
            0) == 0);
  CHECK_THAT(chart, Contains("version=\"1.1\"") && Contains("viewBox=\"0 0 880 ") &&
                        Contains("width=\"880\""));
  CHECK_THAT(chart, Contains("run 7: QKNorm, IWSLT&apos;14 de-en"));
  for (const svg::Panel& panel : panels) {
    CHECK_THAT(chart, Contains(">" + panel.title + "</text>"));
    for (const svg::Series& series : panel.series)
      CHECK_THAT(chart, Contains(">" + series.name + "</text>"));
  }
  CHECK(count(chart, "<g class=\"panel\"") == 4);
  CHECK(count(chart, "<g class=\"series\"") == 15);
  // Few points get markers (dev loss and BLEU: 6 each; gains: 31 each), many do not (train).
  CHECK(count(chart, "<circle") == 6 + 6 + 12 * 31);

  // The 12 gain curves have 12 different colours.
  const std::string gain_part = chart.substr(chart.find(">QKNorm gain g</text>"));
  std::set<std::string> colours;
  for (const std::string& polyline : start_tags(gain_part, "polyline")) {
    colours.insert(attribute(polyline, "stroke"));
  }
  CHECK(colours.size() == 12);
  CHECK(colours.count("") == 0);
}

TEST_CASE("svg: line_charts ticks are round numbers that cover the data", "[svg]") {
  const std::vector<std::vector<std::pair<double, double>>> datasets = {
      {{0, 9.13}, {3000, 1.71}},
      {{17, 0.0123}, {18, 0.0187}},
      {{0, 1.0}, {2.4e6, 1.0000004}},
      {{-5, -2e-6}, {5, 3e-6}},
      {{1, 7}, {2, 7}},  // constant y
  };
  for (const auto& points : datasets) {
    const std::string chart =
        svg::line_charts("t", {svg::Panel{"p", "x", "y", {svg::Series{"s", points}}}});
    REQUIRE(xml_problem(chart) == "");
    for (const std::string axis : {"xtick", "ytick"}) {
      INFO(axis);
      const std::vector<double> ticks = tick_values(chart, axis);
      for (const std::string& label : texts_of_class(chart, axis)) {
        INFO("label '" << label << "'");
        CHECK(label.size() <= 9);  // "0.0125", "2.4e+06": never 0.30000000000000004
      }
      check_round_ticks(ticks);
      const double lo = axis == "xtick" ? std::min(points[0].first, points[1].first)
                                        : std::min(points[0].second, points[1].second);
      const double hi = axis == "xtick" ? std::max(points[0].first, points[1].first)
                                        : std::max(points[0].second, points[1].second);
      CHECK(ticks.front() <= lo + 1e-9 * std::abs(lo));
      CHECK(ticks.back() >= hi - 1e-9 * std::abs(hi));
    }
  }
  // Typical values read back exactly as written.
  const std::string chart = svg::line_charts(
      "t", {svg::Panel{"p", "x", "y", {svg::Series{"s", {{0, 0.3}, {3000, 0.7}}}}}});
  CHECK(texts_of_class(chart, "xtick") ==
        std::vector<std::string>{"0", "500", "1000", "1500", "2000", "2500", "3000"});
  CHECK(texts_of_class(chart, "ytick") ==
        std::vector<std::string>{"0.3", "0.4", "0.5", "0.6", "0.7"});
}

TEST_CASE("svg: line_charts skips NaN and infinite points and handles empty inputs", "[svg]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const svg::Series gappy{
      "gappy",
      {{0, 1}, {1, 2}, {2, nan}, {3, 3}, {4, inf}, {nan, 5}, {-inf, 1}, {5, 4}, {6, 1e301}}};
  const svg::Series all_nan{"all nan", {{0, nan}, {1, nan}}};
  const svg::Series empty{"empty", {}};
  const svg::Series single{"single", {{2, 2}}};
  const std::vector<svg::Panel> panels = {
      svg::Panel{"with gaps", "x", "y", {gappy, all_nan, empty, single}},
      svg::Panel{"only NaN", "x", "y", {all_nan}},
      svg::Panel{"no series", "x", "y", {}},
  };
  const std::string chart = svg::line_charts("NaN & empty", panels, 3);
  INFO(chart);
  CHECK(xml_problem(chart) == "");
  CHECK_THAT(chart, Contains("NaN &amp; empty"));
  // "gappy" breaks into three polylines: (0,1)-(1,2), (3,3), (5,4).
  const std::size_t start = chart.find("<title>gappy</title>");
  const std::string gappy_group = chart.substr(start, chart.find("</g>", start) - start);
  CHECK(count(gappy_group, "<polyline") == 3);
  CHECK(count(gappy_group, "<circle") == 4);
  // No NaN or infinity ever reaches a coordinate.
  CHECK(chart.find("nan\"") == std::string::npos);
  CHECK(chart.find("inf") == std::string::npos);
  CHECK_THAT(chart, Contains(">all nan (no data)</text>") && Contains(">empty (no data)</text>"));
  CHECK_THAT(chart, Contains(">single</text>"));
  CHECK(count(chart, ">no data</text>") == 2);  // the "only NaN" and "no series" panels

  const std::string nothing = svg::line_charts("nothing", {});
  CHECK(xml_problem(nothing) == "");
  CHECK_THAT(nothing, Contains(">no data</text>"));
  CHECK_THROWS_AS(svg::line_charts("t", panels, 0), Error);
}

TEST_CASE("svg: line_charts escapes titles, labels and series names", "[svg]") {
  const svg::Panel panel{"<b>loss</b> & \"more\"",
                         "x < y",
                         "it's",
                         {svg::Series{"<script>alert('x')</script>", {{0, 1}, {1, 0}}}}};
  const std::string chart = svg::line_charts("a&b", {panel}, 1);
  CHECK(xml_problem(chart) == "");
  CHECK(chart.find("<script>") == std::string::npos);
  CHECK(chart.find("<b>") == std::string::npos);
  CHECK_THAT(chart, Contains("&lt;b&gt;loss&lt;/b&gt; &amp; &quot;more&quot;") &&
                        Contains("x &lt; y") && Contains("it&apos;s") &&
                        Contains("&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt;"));
}

TEST_CASE("svg: line_charts keeps a legend of many long series names inside the panel", "[svg]") {
  svg::Panel panel{"many", "step", "g", {}};
  for (int i = 0; i < 30; ++i) {
    panel.series.push_back({"module " + std::to_string(i) + (i == 7 ? std::string(80, 'x') : ""),
                            {{0, static_cast<double>(i)}, {1, static_cast<double>(i + 1)}}});
  }
  const std::string chart = svg::line_charts("legend", {panel}, 1);
  CHECK(xml_problem(chart) == "");
  CHECK(count(chart, "class=\"legend\"") == 30);
  CHECK_THAT(chart, Contains(std::string(80, 'x')));    // the full name, as a tooltip
  CHECK_THAT(chart, Contains("x\xE2\x80\xA6</text>"));  // shortened in the legend
  CHECK_THAT(chart, Contains("stroke-dasharray"));      // series 12+ are dashed
  // Every legend entry starts inside the 440-pixel panel.
  std::size_t entries = 0;
  for (const std::string& tag : start_tags(chart, "text")) {
    if (attribute(tag, "class") != "legend") continue;
    ++entries;
    CHECK(std::stod(attribute(tag, "x")) < 440);
  }
  CHECK(entries == 30);
}

// ---- Heatmaps ------------------------------------------------------------------------------

TEST_CASE("svg: heatmap_grid draws one cell per value with escaped token labels", "[svg]") {
  const std::vector<svg::Heatmap> maps = {
      attention("layer 1, head 1", 5, 7), attention("layer 1, head 2", 5, 7),
      attention("layer 2 <cross>", 3, 8), svg::Heatmap{"empty", {}, {}, {}}};
  const std::string grid = svg::heatmap_grid("attention: \"el gato\" & co", maps, 2);
  INFO(grid.substr(0, 800));
  CHECK(xml_problem(grid) == "");
  CHECK(grid.rfind(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"",
            0) == 0);
  CHECK_THAT(grid, Contains("viewBox=\"0 0 "));
  CHECK(count(grid, "class=\"cell\"") == 5 * 7 + 5 * 7 + 3 * 8);
  CHECK(count(grid, "<g class=\"heatmap\"") == 4);
  CHECK_THAT(grid, Contains("attention: &quot;el gato&quot; &amp; co") &&
                       Contains("layer 2 &lt;cross&gt;"));
  CHECK_THAT(grid, Contains(">\xE2\x96\x81"
                            "el</text>") &&
                       Contains(">&lt;unk&gt;</text>") && Contains(">R&amp;D</text>") &&
                       Contains(">&quot;quoted&quot;</text>") && Contains(">it&apos;s</text>"));
  CHECK(grid.find("<unk>") == std::string::npos);
  CHECK(count(grid, "class=\"row-label\"") == 5 + 5 + 3);
  CHECK(count(grid, "class=\"column-label\"") == 7 + 7 + 8);
  CHECK(count(grid, "rotate(-90") >= 7 + 7 + 8);
  CHECK(count(grid, ">no data</text>") == 1);    // the empty map
  CHECK_THAT(grid, Contains("linearGradient"));  // the shared colour scale
  // 0 is white, 1 dark blue; values beyond [0, 1] are clamped; NaN is grey and explained.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string scale = svg::heatmap_grid(
      "scale", {svg::Heatmap{"m", {"q"}, {"a", "b", "c", "d"}, {{0, 1, 7, nan}}}}, 1);
  CHECK(xml_problem(scale) == "");
  CHECK(count(scale, "class=\"cell\" x=\"") == 4);
  CHECK_THAT(scale, Contains("fill=\"#ffffff\"/>") && Contains("fill=\"#08306b\"/>") &&
                        Contains("grey: NaN"));
  CHECK(count(scale, "fill=\"#08306b\"/>") == 2);
  // The square-root scale: 0.25 sits in the middle (the middle colour), so faint attention
  // shows; the axes are named as the caller says.
  const std::string faint = svg::heatmap_grid("faint", {svg::Heatmap{"m", {"q"}, {"a"}, {{0.25}}}}, 1, "rows = target");
  CHECK_THAT(faint, Contains("fill=\"#6baed6\"/>") && Contains("rows = target (square-root colour scale)"));
}

TEST_CASE("svg: heatmap_grid handles many tokens and no maps", "[svg]") {
  // A 60-token sentence (and a 120-token one) keeps every label, at 10 pixels, in cells of 12:
  // the canvas grows instead.
  for (std::size_t n : {60, 120}) {
    const std::string map = svg::heatmap_grid("long", {attention("long", n, n)}, 1);
    CHECK(xml_problem(map) == "");
    CHECK(count(map, "class=\"row-label\"") == n);
    CHECK(count(map, "class=\"column-label\"") == n);
    CHECK(count(map, "class=\"row-label\" text-anchor=\"end\" font-size=\"10\"") == n);
    CHECK_THAT(map, Contains("width=\"12\" height=\"12\""));
  }
  const std::string big = svg::heatmap_grid("big", {attention("long", 400, 90)}, 1);
  CHECK(xml_problem(big) == "");
  CHECK(count(big, "class=\"cell\"") == 400 * 90);
  CHECK(count(big, "class=\"row-label\"") < 400);  // past 300 tokens: every n-th label
  const std::string none = svg::heatmap_grid("none", {}, 3);
  CHECK(xml_problem(none) == "");
  CHECK_THAT(none, Contains(">no data</text>"));
}

TEST_CASE("svg: heatmap_grid rejects values that do not match the labels", "[svg]") {
  svg::Heatmap rows_off = attention("rows off", 3, 4);
  rows_off.row_labels.pop_back();
  CHECK_THROWS_WITH(svg::heatmap_grid("t", {attention("fine", 2, 2), rows_off}, 2),
                    Contains("heatmap 1 ('rows off') has 3 rows of values but 2 row labels"));
  svg::Heatmap columns_off = attention("columns off", 3, 4);
  columns_off.values[2].push_back(0.5);
  CHECK_THROWS_WITH(
      svg::heatmap_grid("t", {columns_off}, 2),
      Contains("heatmap 0 ('columns off'): row 2 has 5 values but there are 4 column labels"));
  CHECK_THROWS_AS(svg::heatmap_grid("t", {attention("ok", 2, 2)}, 0), Error);
}

// ---- Files ---------------------------------------------------------------------------------

TEST_CASE("svg: write_svg writes the document atomically", "[svg]") {
  char name[] = "/tmp/qkgrad-svg-XXXXXX";
  REQUIRE(::mkdtemp(name) != nullptr);
  const std::string dir = name;
  const std::string path = dir + "/curves.svg";
  const std::string chart = svg::line_charts("curves", training_panels());
  svg::write_svg(path, chart);
  CHECK(read_file(path, 1 << 26) == chart);
  svg::write_svg(path, "<svg/>");  // replaces the old file
  CHECK(read_file(path, 1 << 26) == "<svg/>");
  CHECK_THROWS_AS(svg::write_svg(dir + "/missing/x.svg", chart), Error);
  std::filesystem::remove_all(dir);
}
