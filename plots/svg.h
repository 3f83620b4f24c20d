// Small SVG plots for the translation program: line charts of training curves (train loss,
// dev loss, dev BLEU, the QKNorm gain g of each attention module over the steps) and heatmaps
// of attention probabilities (one per layer and head).
//
// Each function returns a complete, standalone SVG 1.1 document as a string: open it in any
// browser, or write it with write_svg. Nothing here needs anything beyond the standard library.
//
//   svg::Panel loss{"loss", "step", "cross-entropy", {{"train", {{0, 9.1}, {100, 4.2}}}}};
//   svg::write_svg("curves.svg", svg::line_charts("run 7", {loss}));
//
// All text (titles, series names, tokens) is XML-escaped here; callers pass plain UTF-8.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qkgrad::svg {

// ---- Line charts ---------------------------------------------------------------------------

// One curve: (x, y) points drawn in order as a line. Points whose x or y is NaN or infinite
// are skipped, and the line has a gap there. Few points (a dev-set curve evaluated 8 times)
// also get a small circle at each point.
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
};

// One chart: a title, axis labels and any number of series, with a legend naming each series.
struct Panel {
  std::string title, x_label, y_label;
  std::vector<Series> series;
};

// A grid of line-chart panels under one `title`, `columns` panels per row (columns >= 1, else
// qkgrad::Error). Axes get round tick values (1, 2 or 5 times a power of ten). The legend sits
// below each chart, wrapped over as many rows as the series need, so a panel with 12 attention
// modules stays readable: series take distinct colours from a fixed palette (then dashed, then
// dotted lines once the palette is used up). A panel with no drawable points says "no data".
std::string line_charts(const std::string& title, const std::vector<Panel>& panels,
                        int columns = 2);

// ---- Heatmaps ------------------------------------------------------------------------------

// A matrix of values in [0, 1], e.g. attention probabilities: row i = query token i, column
// j = key token j. values must have row_labels.size() rows of column_labels.size() values each.
struct Heatmap {
  std::string title;
  std::vector<std::string> row_labels, column_labels;
  std::vector<std::vector<double>> values;
};

// A grid of heatmaps under one `title`, `columns` per row (columns >= 1). Cells go from white
// (0) to dark blue (1) on one colour scale, shown once at the top with `axes` (what rows and
// columns are); the colour follows the square root of the value, so that diffuse attention
// stays visible. Values outside [0, 1] are clamped and NaN cells are grey. Row labels sit on
// the left, column labels below, rotated. Cells are at least 12 pixels (the canvas grows with
// the sentence), so every token has a 10-pixel label up to 300 tokens; beyond, every n-th.
// Throws qkgrad::Error naming the heatmap when the sizes of values and labels disagree.
std::string heatmap_grid(const std::string& title, const std::vector<Heatmap>& maps, int columns,
                         const std::string& axes = "rows: queries, columns: keys");

// ---- Files ---------------------------------------------------------------------------------

// Writes `svg` to `path` atomically (io/atomic_file.h): a crash never leaves half a file.
void write_svg(const std::string& path, const std::string& svg);

// ---- Building blocks, public so that the tests can check them ------------------------------

// `text` made safe inside XML text and attribute values: & < > " ' become entities, and any
// byte sequence that is not valid UTF-8, or a control character XML forbids, becomes U+FFFD.
std::string escape_xml(std::string_view text);

// Round tick values covering [lo, hi]: about `target` (>= 2) evenly spaced multiples of a step
// that is 1, 2 or 5 times a power of ten. The first tick is <= lo and the last >= hi, so the
// ticks also give the axis limits. An empty range (lo == hi) is widened around its value.
// lo and hi must be finite with lo <= hi and magnitudes at most 1e300.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

}  // namespace qkgrad::svg
