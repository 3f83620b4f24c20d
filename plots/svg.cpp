// SVG line charts and heatmaps. See plots/svg.h for what each function draws.
//
// An SVG file is XML text: shapes (<rect>, <polyline>, <circle>, <text>) placed in pixel
// coordinates, with y growing downwards. Each plot here is built in three steps:
//   1. layout: sizes in pixels, computed from the data (how many ticks, legend rows, tokens);
//   2. scales: data values -> pixel positions (class Scale);
//   3. output: the elements appended to one std::string, every piece of text escaped.
// Text widths are estimated (0.6 of the font size per character), which is close enough for
// sans-serif fonts and keeps us free of any font library.
#include "plots/svg.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/text.h"

namespace qkgrad::svg {

namespace {

// ---- Text ----------------------------------------------------------------------------------

// Largest magnitude a point may have: beyond it, axis arithmetic (hi - lo, tick * step) could
// overflow, so such points are skipped like infinities.
constexpr double kMaxMagnitude = 1e300;

// The replacement character U+FFFD, in UTF-8, for bytes that cannot appear in XML.
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The horizontal ellipsis U+2026, in UTF-8, that ends a shortened label.
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";

// XML 1.0 allows tab, newline, carriage return and everything from U+0020 up, except the
// surrogates and U+FFFE / U+FFFF.
bool is_xml_char(char32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

// Number of characters (code points) in `text`; an invalid byte counts as one character.
std::size_t char_count(std::string_view text) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < text.size(); ++count) {
    char32_t c = 0;
    i += std::max<std::size_t>(1, decode_utf8(text, i, c));
  }
  return count;
}

// `text` cut to at most `max_chars` characters, ending in "…" when it was cut. Cuts fall
// between characters, never inside one (max_chars >= 2).
std::string shorten(std::string_view text, std::size_t max_chars) {
  if (char_count(text) <= max_chars) return std::string(text);
  std::size_t i = 0;
  for (std::size_t kept = 0; kept + 1 < max_chars; ++kept) {
    char32_t c = 0;
    i += std::max<std::size_t>(1, decode_utf8(text, i, c));
  }
  return std::string(text.substr(0, i)) + std::string(kEllipsis);
}

// Estimated width in pixels of `text` at `font_size` (sans-serif averages 0.6 em a character).
double text_width(std::string_view text, double font_size) {
  return 0.6 * font_size * static_cast<double>(char_count(text));
}

// ---- Numbers -------------------------------------------------------------------------------

// A pixel coordinate with one decimal, e.g. "123.4". std::to_chars ignores the locale, so a
// German locale can never turn it into "123,4".
std::string px(double value) {
  std::array<char, 512> buffer{};  // enough for any double in fixed notation
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                    std::chars_format::fixed, 1);
  QKGRAD_CHECK(result.ec == std::errc(), "svg: cannot format the coordinate ", value);
  return std::string(buffer.data(), result.ptr);
}

// `value` in general notation with `digits` significant digits, e.g. (1.5e6, 2) -> "1.5e+06".
std::string general(double value, int digits) {
  std::array<char, 64> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                    std::chars_format::general, std::max(1, digits));
  QKGRAD_CHECK(result.ec == std::errc(), "svg: cannot format the number ", value);
  return std::string(buffer.data(), result.ptr);
}

// The labels of ticks from nice_ticks: as many decimals as the step needs ("0.05", "0.10",
// "0.15" have two) and no more; scientific notation for very large or very fine ticks.
std::vector<std::string> tick_labels(const std::vector<double>& ticks) {
  const double step = ticks[1] - ticks[0];
  // The step is 1, 2 or 5 times 10^exponent; log10 of it is exponent + 0, 0.30 or 0.70.
  const int exponent = static_cast<int>(std::floor(std::log10(step) + 0.01));
  double largest = 0;
  for (double t : ticks) largest = std::max(largest, std::abs(t));
  const bool scientific = largest >= 1e6 || exponent < -4;

  std::vector<std::string> labels;
  for (double t : ticks) {
    if (std::abs(t) < step * 1e-6) t = 0;  // no "-0" or "1e-17" where the tick is zero
    if (scientific) {
      // Significant digits down to the step's digit: 1.25e+06 with a step of 5e+04 needs 3.
      const int magnitude =
          t == 0 ? exponent : static_cast<int>(std::floor(std::log10(std::abs(t))));
      labels.push_back(general(t, magnitude - exponent + 1));
    } else {
      std::array<char, 512> buffer{};
      const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), t,
                                        std::chars_format::fixed, std::max(0, -exponent));
      QKGRAD_CHECK(result.ec == std::errc(), "svg: cannot format the tick ", t);
      labels.emplace_back(buffer.data(), result.ptr);
    }
  }
  return labels;
}

// ---- SVG pieces ----------------------------------------------------------------------------

// The start of a document `width` x `height` pixels: XML declaration, the <svg> root with
// its namespace, size and viewBox, a <title> for the browser tab, a white background.
std::string document_start(const std::string& title, int width, int height) {
  const std::string w = std::to_string(width), h = std::to_string(height);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\"";
  out += " width=\"" + w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h + "\"";
  out += " font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\">\n";
  out += "<title>" + escape_xml(title) + "</title>\n";
  out += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"white\"/>\n";
  return out;
}

// A <text> element at (x, y) holding `content` (escaped here); `attributes` are extra ones,
// e.g. "text-anchor=\"middle\" font-size=\"10\"". When `full` differs from `content` (the
// label was shortened) it becomes a tooltip.
std::string text(double x, double y, const std::string& attributes, std::string_view content,
                 std::string_view full = {}) {
  std::string out = "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" " + attributes + ">";
  if (!full.empty() && full != content) out += "<title>" + escape_xml(full) + "</title>";
  return out + escape_xml(content) + "</text>\n";
}

// A line from (x1, y1) to (x2, y2).
std::string line(double x1, double y1, double x2, double y2, const std::string& attributes) {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) +
         "\" " + attributes + "/>\n";
}

// A rectangle with its top-left corner at (x, y).
std::string rect(double x, double y, double width, double height, const std::string& attributes) {
  return "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(width) + "\" height=\"" +
         px(height) + "\" " + attributes + "/>\n";
}

// ---- Line charts ---------------------------------------------------------------------------

// Sizes of one panel, in pixels. The plot area is the framed rectangle the lines are drawn
// in; the margins around it hold the title, the tick labels and the axis labels.
constexpr int kPanelWidth = 440;
constexpr int kMarginLeft = 70, kMarginRight = 24, kMarginTop = 34, kMarginBottom = 46;
constexpr int kPlotWidth = kPanelWidth - kMarginLeft - kMarginRight;
constexpr int kPlotHeight = 220;
constexpr int kDocumentTitleHeight = 44;  // the document's title above the grid of panels
constexpr double kLegendFont = 10, kLegendLineHeight = 14;
constexpr int kLegendSwatch = 22;         // the sample line before each series name
constexpr std::size_t kMarkerLimit = 40;  // series with at most this many points get markers

// Distinct colours (Tableau 10, plus black and light blue) for series 0, 1, 2, ... Series
// 12 to 23 reuse them dashed, 24 to 35 dotted, and so on.
constexpr std::array<std::string_view, 12> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                       "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                       "#bcbd22", "#17becf", "#000000", "#aec7e8"};
constexpr std::array<std::string_view, 3> kDashes = {"", "6 3", "1.5 2.5"};

// The stroke attributes of series number `index`.
std::string series_style(std::size_t index) {
  const std::string_view dash = kDashes[(index / kPalette.size()) % kDashes.size()];
  std::string style = "stroke=\"" + std::string(kPalette[index % kPalette.size()]) + "\"";
  if (!dash.empty()) style += " stroke-dasharray=\"" + std::string(dash) + "\"";
  return style;
}

// Whether a point can be drawn: finite, and not so large that the axis arithmetic overflows.
bool drawable(const std::pair<double, double>& point) {
  return std::isfinite(point.first) && std::isfinite(point.second) &&
         std::abs(point.first) <= kMaxMagnitude && std::abs(point.second) <= kMaxMagnitude;
}

std::size_t drawable_count(const Series& series) {
  return static_cast<std::size_t>(
      std::count_if(series.points.begin(), series.points.end(), drawable));
}

// Maps data values in [lo, hi] linearly onto pixels in [from, to] (to < from for a y axis,
// since pixel y grows downwards).
struct Scale {
  double lo, hi, from, to;
  double operator()(double value) const { return from + (value - lo) / (hi - lo) * (to - from); }
};

// How the legend below a panel is laid out: every entry gets the same width (the longest
// name's), as many entries per row as fit, and names longer than half a row are shortened.
struct LegendLayout {
  std::size_t max_chars = 0;  // longer names are shortened to this many characters
  double entry_width = 0;
  std::size_t per_row = 1;
  std::size_t rows = 0;
};

// The label a series has in the legend: its name, marked when nothing of it can be drawn.
std::string legend_name(const Series& series) {
  return drawable_count(series) == 0 ? series.name + " (no data)" : series.name;
}

LegendLayout legend_layout(const Panel& panel) {
  LegendLayout layout;
  const double available = kPanelWidth - 2 * 12;  // the legend may use the panel's width
  const double gap = 14;                          // between one entry and the next
  // At least two entries fit in a row: one very long name must not force one per row.
  layout.max_chars =
      static_cast<std::size_t>((available / 2 - kLegendSwatch - gap) / (0.6 * kLegendFont));
  double widest = 0;
  for (const Series& series : panel.series) {
    const std::string name = shorten(legend_name(series), layout.max_chars);
    widest = std::max(widest, text_width(name, kLegendFont));
  }
  layout.entry_width = kLegendSwatch + widest + gap;
  layout.per_row =
      std::max<std::size_t>(1, static_cast<std::size_t>(available / layout.entry_width));
  layout.rows = (panel.series.size() + layout.per_row - 1) / layout.per_row;
  return layout;
}

// Height of a panel: margins, plot, and the legend's rows below.
int panel_height(const Panel& panel) {
  const auto rows = static_cast<double>(legend_layout(panel).rows);
  return kMarginTop + kPlotHeight + kMarginBottom +
         static_cast<int>(std::ceil(rows * kLegendLineHeight)) + 8;
}

// The data ranges of a panel over all its drawable points; false when there are none.
bool data_range(const Panel& panel, double& x_lo, double& x_hi, double& y_lo, double& y_hi) {
  bool any = false;
  for (const Series& series : panel.series) {
    for (const auto& point : series.points) {
      if (!drawable(point)) continue;
      x_lo = any ? std::min(x_lo, point.first) : point.first;
      x_hi = any ? std::max(x_hi, point.first) : point.first;
      y_lo = any ? std::min(y_lo, point.second) : point.second;
      y_hi = any ? std::max(y_hi, point.second) : point.second;
      any = true;
    }
  }
  return any;
}

// Grid lines, tick labels (class "xtick" / "ytick", which the tests read back) and the frame.
std::string axes(const std::vector<double>& x_ticks, const std::vector<std::string>& x_labels,
                 const std::vector<double>& y_ticks, const std::vector<std::string>& y_labels,
                 const Scale& x, const Scale& y) {
  std::string out;
  for (std::size_t i = 0; i < x_ticks.size(); ++i) {
    const double px_x = x(x_ticks[i]);
    out += line(px_x, kMarginTop, px_x, kMarginTop + kPlotHeight, "stroke=\"#e6e6e6\"");
    out +=
        text(px_x, kMarginTop + kPlotHeight + 14,
             "class=\"xtick\" text-anchor=\"middle\" font-size=\"10\" fill=\"#444\"", x_labels[i]);
  }
  for (std::size_t i = 0; i < y_ticks.size(); ++i) {
    const double px_y = y(y_ticks[i]);
    out += line(kMarginLeft, px_y, kMarginLeft + kPlotWidth, px_y, "stroke=\"#e6e6e6\"");
    out += text(kMarginLeft - 5, px_y + 3.5,
                "class=\"ytick\" text-anchor=\"end\" font-size=\"10\" fill=\"#444\"", y_labels[i]);
  }
  out += rect(kMarginLeft, kMarginTop, kPlotWidth, kPlotHeight, "fill=\"none\" stroke=\"#888\"");
  return out;
}

// One series: its runs of consecutive drawable points as polylines (a NaN leaves a gap), and
// circles at the points when there are few. The <title> shows the name on mouse-over.
std::string series_lines(const Series& series, std::size_t index, const Scale& x, const Scale& y) {
  const std::string style = series_style(index);
  const bool markers = drawable_count(series) <= kMarkerLimit;
  std::string out = "<g class=\"series\"><title>" + escape_xml(series.name) + "</title>\n";
  std::string run;  // the "x,y x,y ..." points of the current polyline
  const auto end_run = [&] {
    if (!run.empty()) {
      out += "<polyline fill=\"none\" stroke-width=\"1.6\" stroke-linejoin=\"round\" " + style +
             " points=\"" + run + "\"/>\n";
    }
    run.clear();
  };
  for (const auto& point : series.points) {
    if (!drawable(point)) {
      end_run();
      continue;
    }
    if (!run.empty()) run += ' ';
    run += px(x(point.first)) + "," + px(y(point.second));
  }
  end_run();
  if (markers) {
    const std::string colour(kPalette[index % kPalette.size()]);
    for (const auto& point : series.points) {
      if (!drawable(point)) continue;
      out += "<circle cx=\"" + px(x(point.first)) + "\" cy=\"" + px(y(point.second)) +
             "\" r=\"2.5\" fill=\"" + colour + "\"/>\n";
    }
  }
  return out + "</g>\n";
}

// The legend below the plot: a sample line and the name of every series, in wrapped rows.
std::string legend(const Panel& panel) {
  const LegendLayout layout = legend_layout(panel);
  const double top = kMarginTop + kPlotHeight + kMarginBottom;
  std::string out;
  for (std::size_t i = 0; i < panel.series.size(); ++i) {
    const double x = 12 + static_cast<double>(i % layout.per_row) * layout.entry_width;
    const double y = top + static_cast<double>(i / layout.per_row) * kLegendLineHeight;
    out += line(x, y, x + kLegendSwatch - 4, y, "stroke-width=\"2\" " + series_style(i));
    const std::string name = legend_name(panel.series[i]);
    out += text(x + kLegendSwatch, y + 3.5, "class=\"legend\" font-size=\"10\"",
                shorten(name, layout.max_chars), name);
  }
  return out;
}

// One whole panel, drawn with its top-left corner at (0, 0) (the caller translates it).
std::string panel_svg(const Panel& panel) {
  std::string out =
      text(kMarginLeft + kPlotWidth / 2.0, 20,
           "class=\"panel-title\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\"",
           panel.title);
  out += text(kMarginLeft + kPlotWidth / 2.0, kMarginTop + kPlotHeight + 34,
              "text-anchor=\"middle\" font-size=\"11\"", panel.x_label);
  double y_label_x = 16;  // where the y label goes, unless long tick labels need the room
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  if (!data_range(panel, x_lo, x_hi, y_lo, y_hi)) {
    out += rect(kMarginLeft, kMarginTop, kPlotWidth, kPlotHeight, "fill=\"none\" stroke=\"#888\"");
    out +=
        text(kMarginLeft + kPlotWidth / 2.0, kMarginTop + kPlotHeight / 2.0,
             "class=\"no-data\" text-anchor=\"middle\" font-size=\"13\" fill=\"#999\"", "no data");
  } else {
    const std::vector<double> x_ticks = nice_ticks(x_lo, x_hi, 6),
                              y_ticks = nice_ticks(y_lo, y_hi, 5);
    const Scale x{x_ticks.front(), x_ticks.back(), kMarginLeft, kMarginLeft + kPlotWidth};
    const Scale y{y_ticks.front(), y_ticks.back(), kMarginTop + kPlotHeight, kMarginTop};
    const std::vector<std::string> y_labels = tick_labels(y_ticks);
    out += axes(x_ticks, tick_labels(x_ticks), y_ticks, y_labels, x, y);
    for (std::size_t i = 0; i < panel.series.size(); ++i) {
      out += series_lines(panel.series[i], i, x, y);
    }
    // Long tick labels ("1.0000004") push the y label left, to stay clear of them.
    double widest = 0;
    for (const std::string& label : y_labels) widest = std::max(widest, text_width(label, 10));
    y_label_x = std::clamp(kMarginLeft - 5 - widest - 4, 9.0, y_label_x);
  }
  // The y label reads bottom to top: rotated by -90 degrees about its anchor, its glyphs lie
  // to the left of the anchor.
  const double y_label_y = kMarginTop + kPlotHeight / 2.0;
  out += text(y_label_x, y_label_y,
              "text-anchor=\"middle\" font-size=\"11\" transform=\"rotate(-90 " + px(y_label_x) +
                  " " + px(y_label_y) + ")\"",
              panel.y_label);
  return out + legend(panel);
}

// ---- Heatmaps ------------------------------------------------------------------------------

// The colour scale: white at 0, a middle blue at 0.5, dark blue at 1 (as matplotlib's
// "Blues"), linear in between. Lightness falls steadily, so it also reads in greyscale.
struct Rgb {
  double r, g, b;
};
constexpr std::array<Rgb, 3> kScale = {Rgb{255, 255, 255}, Rgb{107, 174, 214}, Rgb{8, 48, 107}};
constexpr std::string_view kNanColour = "#c8c8c8";

// "#rrggbb" for an Rgb with channels in [0, 255].
std::string hex(const Rgb& colour) {
  std::array<char, 8> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "#%02x%02x%02x",
                static_cast<int>(std::lround(colour.r)), static_cast<int>(std::lround(colour.g)),
                static_cast<int>(std::lround(colour.b)));
  return buffer.data();
}

// The colour of a value: clamped to [0, 1], interpolated between the two nearest stops.
// A probability's place on the colour scale: its square root, so that diffuse attention (rows
// of many small probabilities, 0.02 each) stays visible instead of fading into white.
double scale_position(double value) { return std::sqrt(std::clamp(value, 0.0, 1.0)); }

std::string colour_of(double value) {
  if (std::isnan(value)) return std::string(kNanColour);
  const double v = scale_position(value) * static_cast<double>(kScale.size() - 1);  // [0, 2]
  const std::size_t stop = std::min<std::size_t>(static_cast<std::size_t>(v), kScale.size() - 2);
  const double t = v - static_cast<double>(stop);
  const Rgb& a = kScale[stop];
  const Rgb& b = kScale[stop + 1];
  return hex({a.r + t * (b.r - a.r), a.g + t * (b.g - a.g), a.b + t * (b.b - a.b)});
}

// Throws when a heatmap's values do not form a row_labels x column_labels matrix.
void check_sizes(const Heatmap& map, std::size_t index) {
  const std::string name = cat("heatmap_grid: heatmap ", index, " ('", map.title, "')");
  QKGRAD_CHECK(map.values.size() == map.row_labels.size(), name, " has ", map.values.size(),
               " rows of values but ", map.row_labels.size(),
               " row labels; give one row of values per row label (query token)");
  for (std::size_t r = 0; r < map.values.size(); ++r) {
    QKGRAD_CHECK(map.values[r].size() == map.column_labels.size(), name, ": row ", r, " has ",
                 map.values[r].size(), " values but there are ", map.column_labels.size(),
                 " column labels; give one value per column label (key token)");
  }
}

// Sizes shared by all heatmaps of a grid, so that the maps line up. Each map sits in a slot:
// its title on top, row labels on the left, the cells, column labels below.
struct HeatmapLayout {
  int cell = 16;                // side of one cell
  int font = 10;                // label font size
  std::size_t label_every = 1;  // label every n-th token when the cells are too small
  std::size_t max_chars = 12;   // labels are shortened to this many characters
  int row_label_width = 0, column_label_height = 0;
  int slot_width = 0, slot_height = 0;
};
constexpr int kMapTitleHeight = 22;
constexpr int kHeatmapHeader = 78;  // document title and colour scale above the grid
constexpr int kSlotGap = 24;        // space between neighbouring slots

HeatmapLayout heatmap_layout(const std::vector<Heatmap>& maps) {
  HeatmapLayout layout;
  std::size_t rows = 1, columns = 1, row_chars = 1, column_chars = 1;
  for (const Heatmap& map : maps) {
    rows = std::max(rows, map.row_labels.size());
    columns = std::max(columns, map.column_labels.size());
    for (const std::string& label : map.row_labels)
      row_chars = std::max(row_chars, char_count(label));
    for (const std::string& label : map.column_labels)
      column_chars = std::max(column_chars, char_count(label));
  }
  // About 360 pixels for the largest map, but never cells under 12 pixels: a longer sentence
  // gets a larger canvas (an SVG zooms), so that every token keeps a readable 10-pixel label.
  // Only past 300 tokens do the cells shrink (to 6) and every n-th token is labelled.
  const std::size_t tokens = std::max(rows, columns);
  layout.cell = tokens <= 300 ? std::clamp(static_cast<int>(360 / tokens), 12, 16) : 6;
  layout.font = std::clamp(layout.cell - 2, 7, 10);
  layout.label_every = static_cast<std::size_t>((layout.font + layout.cell - 1) / layout.cell);
  const auto label_size = [&](std::size_t chars) {
    return static_cast<int>(std::ceil(0.6 * layout.font *
                                      static_cast<double>(std::min(chars, layout.max_chars)))) +
           6;
  };
  layout.row_label_width = label_size(row_chars);
  layout.column_label_height = label_size(column_chars);
  layout.slot_width = layout.row_label_width + static_cast<int>(columns) * layout.cell + kSlotGap;
  layout.slot_height = kMapTitleHeight + static_cast<int>(rows) * layout.cell +
                       layout.column_label_height + kSlotGap;
  return layout;
}

// One heatmap, with its slot's top-left corner at (0, 0). Cells have class "cell" (the tests
// count them); a shortened label keeps the whole token as a tooltip.
std::string heatmap_svg(const Heatmap& map, const HeatmapLayout& layout) {
  const int cell = layout.cell;
  const int left = layout.row_label_width, top = kMapTitleHeight;
  const int width = static_cast<int>(map.column_labels.size()) * cell;
  const int height = static_cast<int>(map.row_labels.size()) * cell;
  const double centre = left + std::max(width, 60) / 2.0;
  std::string out =
      text(centre, 15,
           "class=\"map-title\" text-anchor=\"middle\" font-size=\"12\" font-weight=\"bold\"",
           map.title);
  if (width == 0 || height == 0) {
    return out + text(centre, top + 20,
                      "class=\"no-data\" text-anchor=\"middle\" font-size=\"12\" fill=\"#999\"",
                      "no data");
  }
  for (std::size_t r = 0; r < map.values.size(); ++r) {
    for (std::size_t c = 0; c < map.values[r].size(); ++c) {
      out += "<rect class=\"cell\" x=\"" + std::to_string(left + static_cast<int>(c) * cell) +
             "\" y=\"" + std::to_string(top + static_cast<int>(r) * cell) + "\" width=\"" +
             std::to_string(cell) + "\" height=\"" + std::to_string(cell) + "\" fill=\"" +
             colour_of(map.values[r][c]) + "\"/>\n";
    }
  }
  out += rect(left, top, width, height, "fill=\"none\" stroke=\"#999\" stroke-width=\"0.5\"");

  const std::string font = "font-size=\"" + std::to_string(layout.font) + "\"";
  const double half_glyph = 0.35 * layout.font;  // centres a line of text on a point
  for (std::size_t r = 0; r < map.row_labels.size(); r += layout.label_every) {
    const std::string& label = map.row_labels[r];
    out += text(left - 3, top + (static_cast<double>(r) + 0.5) * cell + half_glyph,
                "class=\"row-label\" text-anchor=\"end\" " + font, shorten(label, layout.max_chars),
                label);
  }
  for (std::size_t c = 0; c < map.column_labels.size(); c += layout.label_every) {
    // Rotated by -90 degrees about its anchor, the text reads bottom to top and ends just
    // below the cells; text-anchor "end" puts the end of the text at the anchor.
    const double x = left + (static_cast<double>(c) + 0.5) * cell + half_glyph,
                 y = top + height + 3;
    const std::string& label = map.column_labels[c];
    out += text(x, y,
                "class=\"column-label\" text-anchor=\"end\" " + font + " transform=\"rotate(-90 " +
                    px(x) + " " + px(y) + ")\"",
                shorten(label, layout.max_chars), label);
  }
  return out;
}

bool has_nan(const std::vector<Heatmap>& maps) {
  for (const Heatmap& map : maps) {
    for (const auto& row : map.values) {
      if (std::any_of(row.begin(), row.end(), [](double v) { return std::isnan(v); })) return true;
    }
  }
  return false;
}

// The colour scale under the document title: a gradient bar with the same stops as the cells,
// ticks at 0, 0.5 and 1, and what rows and columns mean.
std::string colour_legend(bool show_nan, const std::string& axes) {
  const double x = 20, y = 48, width = 200, height = 10;
  std::string out = "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"0\" x2=\"1\" y2=\"0\">";
  for (std::size_t i = 0; i < kScale.size(); ++i) {
    const double offset = static_cast<double>(i) / static_cast<double>(kScale.size() - 1);
    out += "<stop offset=\"" + px(offset) + "\" stop-color=\"" + hex(kScale[i]) + "\"/>";
  }
  out += "</linearGradient></defs>\n";
  out += rect(x, y, width, height, "fill=\"url(#scale)\" stroke=\"#999\" stroke-width=\"0.5\"");
  const std::array<std::pair<double, std::string_view>, 5> ticks = {
      {{0.0, "0"}, {0.05, "0.05"}, {0.25, "0.25"}, {0.5, "0.5"}, {1.0, "1"}}};
  for (const auto& [value, label] : ticks) {
    out += text(x + scale_position(value) * width, y + height + 11, "text-anchor=\"middle\" font-size=\"9\"",
                label);
  }
  std::string note = axes + " (square-root colour scale)";
  if (show_nan) note += "; grey: NaN";
  out += text(x + width + 12, y + 9, "font-size=\"10\" fill=\"#444\"", note);
  return out;
}

}  // namespace

// ---- Public functions ----------------------------------------------------------------------

std::string escape_xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    char32_t c = 0;
    const std::size_t length = decode_utf8(text, i, c);
    if (length == 0 || !is_xml_char(c)) {
      out += kReplacement;
      i += std::max<std::size_t>(1, length);
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  QKGRAD_CHECK(target >= 2, "nice_ticks: target must be at least 2 ticks, got ", target);
  QKGRAD_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi &&
                   std::abs(lo) <= kMaxMagnitude && std::abs(hi) <= kMaxMagnitude,
               "nice_ticks: the range [", lo, ", ", hi,
               "] must be finite, with lo <= hi and magnitudes at most 1e300");
  // A range too narrow to divide (all points equal) is widened by 10% of its value each way,
  // or to [-1, 1] around zero.
  if (hi - lo <= 1e-9 * std::max(std::abs(lo), std::abs(hi))) {
    const double centre = lo / 2 + hi / 2;
    const double half = std::abs(centre) < 1e-300 ? 1.0 : std::abs(centre) * 0.1;
    lo = centre - half;
    hi = centre + half;
  }
  // The step: the raw spacing rounded to the nearest of 1, 2, 5 or 10 times a power of ten
  // (on a log scale: 1.5, 3 and 7 are about halfway), so the count stays near `target`.
  const double raw = (hi - lo) / (target - 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;  // in [1, 10)
  const double step = power * (fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10);
  // Multiples of the step from the one at or below lo to the one at or above hi. The 1e-9
  // absorbs rounding (0.3 / 0.1 = 2.9999999999999996 must count as 3). Ticks are k * step,
  // never a running sum, so no error accumulates.
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::max(first + 1, std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (double k = first; k <= last; ++k) ticks.push_back(k * step);
  return ticks;
}

std::string line_charts(const std::string& title, const std::vector<Panel>& panels, int columns) {
  QKGRAD_CHECK(columns >= 1, "line_charts: columns must be at least 1, got ", columns);
  const std::size_t per_row = std::min<std::size_t>(static_cast<std::size_t>(columns),
                                                    std::max<std::size_t>(1, panels.size()));
  // Each row of the grid is as tall as its tallest panel (the one with most legend rows);
  // row_top[r] is where row r starts, row_top.back() where the document ends.
  const std::size_t rows = std::max<std::size_t>(1, (panels.size() + per_row - 1) / per_row);
  std::vector<int> row_height(rows, panel_height(Panel{}));
  for (std::size_t i = 0; i < panels.size(); ++i) {
    row_height[i / per_row] = std::max(row_height[i / per_row], panel_height(panels[i]));
  }
  std::vector<int> row_top = {kDocumentTitleHeight};
  for (const int h : row_height) row_top.push_back(row_top.back() + h);

  const int width = static_cast<int>(per_row) * kPanelWidth;
  std::string out = document_start(title, width, row_top.back());
  out +=
      text(width / 2.0, 28,
           "class=\"title\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\"", title);
  if (panels.empty()) {
    out +=
        text(width / 2.0, kDocumentTitleHeight + 40,
             "class=\"no-data\" text-anchor=\"middle\" font-size=\"13\" fill=\"#999\"", "no data");
  }
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const int x = static_cast<int>(i % per_row) * kPanelWidth;
    const int y = row_top[i / per_row];
    out += "<g class=\"panel\" transform=\"translate(" + std::to_string(x) + " " +
           std::to_string(y) + ")\">\n";
    out += panel_svg(panels[i]) + "</g>\n";
  }
  return out + "</svg>\n";
}

std::string heatmap_grid(const std::string& title, const std::vector<Heatmap>& maps, int columns,
                         const std::string& axes) {
  QKGRAD_CHECK(columns >= 1, "heatmap_grid: columns must be at least 1, got ", columns);
  for (std::size_t i = 0; i < maps.size(); ++i) check_sizes(maps[i], i);

  const HeatmapLayout layout = heatmap_layout(maps);
  const std::size_t per_row = std::min<std::size_t>(static_cast<std::size_t>(columns),
                                                    std::max<std::size_t>(1, maps.size()));
  const std::size_t rows = std::max<std::size_t>(1, (maps.size() + per_row - 1) / per_row);
  const int left = 20;
  const int width = std::max(440, left + static_cast<int>(per_row) * layout.slot_width);
  const int height = kHeatmapHeader + static_cast<int>(rows) * layout.slot_height;

  std::string out = document_start(title, width, height);
  out += text(left, 28, "class=\"title\" font-size=\"17\" font-weight=\"bold\"", title);
  out += colour_legend(has_nan(maps), axes);
  if (maps.empty()) {
    out += text(left, kHeatmapHeader + 20, "class=\"no-data\" font-size=\"13\" fill=\"#999\"",
                "no data");
  }
  for (std::size_t i = 0; i < maps.size(); ++i) {
    const int x = left + static_cast<int>(i % per_row) * layout.slot_width;
    const int y = kHeatmapHeader + static_cast<int>(i / per_row) * layout.slot_height;
    out += "<g class=\"heatmap\" transform=\"translate(" + std::to_string(x) + " " +
           std::to_string(y) + ")\">\n";
    out += heatmap_svg(maps[i], layout) + "</g>\n";
  }
  return out + "</svg>\n";
}

void write_svg(const std::string& path, const std::string& svg) {
  write_file_atomically(path,
                        [&](std::FILE* file) { std::fwrite(svg.data(), 1, svg.size(), file); });
}

}  // namespace qkgrad::svg
