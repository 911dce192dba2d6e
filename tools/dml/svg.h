// A small hand-written SVG writer for `dml report` (tools/dml/report.cpp): shapes and text into
// one document, "nice" axis ticks, and two chart helpers (lines, grouped bars).
//
// Coordinates are SVG user units (pixels), y downwards; numbers are written with two decimals.
// Every chart maps data to pixels linearly over its plot rectangle:
//
//   px = plot.x + (v - x.lo) / (x.hi - x.lo) * plot.w
//   py = plot.y + plot.h - (v - y.lo) / (y.hi - y.lo) * plot.h
//
// where [lo, hi] is the axis range nice_ticks() chose. Curves are <polyline class="curve">, bars
// <rect class="bar">, legend swatches class="legend"; readers (and tests) can pick them out.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dml::svg {

// &, <, >, " and ' as entities.
std::string escape(const std::string& text);

// `value` with two decimals ("657.50").
std::string number(double value);

class Document {
 public:
  Document(double width, double height);
  // cls and title may be empty; a title becomes a <title> child (a tooltip in browsers).
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& cls = "", const std::string& title = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double width = 1.0, bool dashed = false);
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                const std::string& cls = "curve", const std::string& title = "");
  // anchor: "start", "middle" or "end"; rotate: degrees about (x, y).
  void text(double x, double y, const std::string& text, double size = 12.0,
            const std::string& anchor = "start", double rotate = 0.0, bool bold = false,
            const std::string& cls = "");
  void circle(double x, double y, double r, const std::string& fill, const std::string& cls = "",
              const std::string& title = "");
  // The whole file: "<svg ...>" ... "</svg>\n".
  std::string str() const;

 private:
  double width_, height_;
  std::string body_;
};

// Axis ranges rounded out to a step of 1, 2 or 5 times a power of ten: step = the smallest such
// number >= (hi - lo) / target, lo' = floor(lo / step) step, hi' = ceil(hi / step) step; ticks
// lo', lo' + step, ..., hi'. hi <= lo widens the range to [lo, lo + 1] first.
struct Ticks {
  double lo = 0.0, hi = 1.0, step = 1.0;
  std::vector<double> values;
};
Ticks nice_ticks(double lo, double hi, int target = 5);

struct Rect {
  double x = 0.0, y = 0.0, w = 0.0, h = 0.0;
};

// The pixel of a data value on an axis (the formulas above).
double x_pixel(const Rect& plot, const Ticks& x, double v);
double y_pixel(const Rect& plot, const Ticks& y, double v);

// Eight distinguishable colours (hex), cycled.
const std::string& palette(size_t index);

// A frame around the plot, grid lines and tick labels for y (and for x when x is non-null),
// axis labels below and to the left.
void axes(Document& doc, const Rect& plot, const Ticks* x, const Ticks& y,
          const std::string& x_label, const std::string& y_label);

// Legend entries stacked downwards from (x, y): a colour swatch and the name.
void legend(Document& doc, double x, double y, const std::vector<std::string>& names,
            const std::vector<std::string>& colors);

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (x, y) in data units
  // Each point a circle (class "value-marker", radius 4) with its value written above it
  // (class "value-label"), e.g. the evaluations; otherwise a 4-pixel square (class "marker")
  // per point when there are at most 40.
  bool label_points = false;
};

// The y range of a line chart: the data's [lo, hi] widened by 5 % of hi - lo on both sides (by
// 5 % of |hi|, or 0.5 when hi is 0, if all values are equal), then nice_ticks(). Data that are all
// >= 0 never get a range below 0: a lower end that the margin took below 0 is raised to 0.
Ticks fitted_ticks(double lo, double hi);

// Axes, one polyline per series with at least one point, and a legend right of the plot (from
// x = plot.x + plot.w + 70). The y ticks are fitted_ticks() of every point. The last value of
// each series is written right of its last point (class "last-value", three significant digits).
void line_chart(Document& doc, const Rect& plot, const Ticks& x, const std::string& title,
                const std::string& x_label, const std::string& y_label,
                const std::vector<Series>& series);

// Grouped bars: values[s][g] is series s in group g. Each group takes plot.w / groups of width;
// its bars fill the middle 80 % side by side (series order), from the zero line up (or down for a
// negative value); the last group's values are written above its bars. A bar less than one pixel
// high (a value of 0) also gets a 4-pixel line centred on the zero line (class "zero-bar") and its
// value written above it, so that it is not an empty slot. The y ticks cover 0,
// `y_floor_hi` and every value. Legend right of the plot.
void bar_chart(Document& doc, const Rect& plot, const std::string& title,
               const std::vector<std::string>& groups, const std::vector<std::string>& names,
               const std::vector<std::vector<double>>& values, const std::string& y_label,
               double y_floor_hi);

}  // namespace dml::svg
