// The SVG writer of `dml report` (header: tools/dml/svg.h).
#include "tools/dml/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dml::svg {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
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
        out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  return text == "-0.00" ? "0.00" : text;
}

namespace {

std::string tick_label(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%g", std::abs(value) < 1e-12 ? 0.0 : value);
  return buffer;
}

}  // namespace

Document::Document(double width, double height) : width_(width), height_(height) {}

void Document::rect(double x, double y, double w, double h, const std::string& fill,
                    const std::string& cls, const std::string& title) {
  body_ += "<rect";
  if (!cls.empty()) body_ += " class=\"" + escape(cls) + "\"";
  body_ += " x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(w) +
           "\" height=\"" + number(h) + "\" fill=\"" + escape(fill) + "\"";
  if (title.empty()) {
    body_ += "/>\n";
  } else {
    body_ += "><title>" + escape(title) + "</title></rect>\n";
  }
}

void Document::line(double x1, double y1, double x2, double y2, const std::string& stroke,
                    double width, bool dashed) {
  body_ += "<line x1=\"" + number(x1) + "\" y1=\"" + number(y1) + "\" x2=\"" + number(x2) +
           "\" y2=\"" + number(y2) + "\" stroke=\"" + escape(stroke) + "\" stroke-width=\"" +
           number(width) + "\"" + (dashed ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
}

void Document::polyline(const std::vector<std::pair<double, double>>& points,
                        const std::string& stroke, const std::string& cls,
                        const std::string& title) {
  body_ += "<polyline class=\"" + escape(cls) + "\" fill=\"none\" stroke=\"" + escape(stroke) +
           "\" stroke-width=\"2\" points=\"";
  for (size_t i = 0; i < points.size(); ++i) {
    body_ += (i ? " " : "") + number(points[i].first) + "," + number(points[i].second);
  }
  body_ += "\"";
  body_ += title.empty() ? "/>\n" : "><title>" + escape(title) + "</title></polyline>\n";
}

void Document::circle(double x, double y, double r, const std::string& fill, const std::string& cls,
                      const std::string& title) {
  body_ += "<circle";
  if (!cls.empty()) body_ += " class=\"" + escape(cls) + "\"";
  body_ += " cx=\"" + number(x) + "\" cy=\"" + number(y) + "\" r=\"" + number(r) + "\" fill=\"" +
           escape(fill) + "\"";
  body_ += title.empty() ? "/>\n" : "><title>" + escape(title) + "</title></circle>\n";
}

void Document::text(double x, double y, const std::string& text, double size,
                    const std::string& anchor, double rotate, bool bold, const std::string& cls) {
  body_ += "<text";
  if (!cls.empty()) body_ += " class=\"" + escape(cls) + "\"";
  body_ += " x=\"" + number(x) + "\" y=\"" + number(y) + "\" font-size=\"" + number(size) +
           "\" text-anchor=\"" + anchor + "\"";
  if (rotate != 0.0) {
    body_ += " transform=\"rotate(" + number(rotate) + " " + number(x) + " " + number(y) + ")\"";
  }
  if (bold) body_ += " font-weight=\"bold\"";
  body_ += ">" + escape(text) + "</text>\n";
}

std::string Document::str() const {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(width_) + "\" height=\"" +
         number(height_) + "\" viewBox=\"0 0 " + number(width_) + " " + number(height_) +
         "\" font-family=\"sans-serif\">\n<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n" +
         body_ + "</svg>\n";
}

Ticks nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1.0;
  const double raw = (hi - lo) / std::max(target, 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10.0 * power;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw * (1.0 - 1e-12)) {
      step = m * power;
      break;
    }
  }
  Ticks t;
  t.step = step;
  // A relative slack so that 0.3 / 0.1 = 2.9999999999999996 does not round out a whole step.
  const double slack = 1e-9;
  t.lo = std::floor(lo / step + slack) * step;
  t.hi = std::ceil(hi / step - slack) * step;
  const int count = static_cast<int>(std::lround((t.hi - t.lo) / step));
  for (int i = 0; i <= count; ++i) t.values.push_back(t.lo + i * step);
  return t;
}

double x_pixel(const Rect& plot, const Ticks& x, double v) {
  return plot.x + (v - x.lo) / (x.hi - x.lo) * plot.w;
}

double y_pixel(const Rect& plot, const Ticks& y, double v) {
  return plot.y + plot.h - (v - y.lo) / (y.hi - y.lo) * plot.h;
}

const std::string& palette(size_t index) {
  static const std::vector<std::string> colors = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                  "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return colors[index % colors.size()];
}

void axes(Document& doc, const Rect& plot, const Ticks* x, const Ticks& y,
          const std::string& x_label, const std::string& y_label) {
  for (double v : y.values) {
    const double py = y_pixel(plot, y, v);
    doc.line(plot.x, py, plot.x + plot.w, py, "#dddddd");
    doc.text(plot.x - 6, py + 4, tick_label(v), 11, "end");
  }
  if (x != nullptr) {
    for (double v : x->values) {
      const double px = x_pixel(plot, *x, v);
      doc.line(px, plot.y + plot.h, px, plot.y + plot.h + 5, "#333333");
      doc.text(px, plot.y + plot.h + 18, tick_label(v), 11, "middle");
    }
  }
  doc.line(plot.x, plot.y, plot.x, plot.y + plot.h, "#333333");
  doc.line(plot.x, plot.y + plot.h, plot.x + plot.w, plot.y + plot.h, "#333333");
  doc.text(plot.x + plot.w / 2, plot.y + plot.h + 38, x_label, 12, "middle");
  doc.text(plot.x - 50, plot.y + plot.h / 2, y_label, 12, "middle", -90.0);
}

void legend(Document& doc, double x, double y, const std::vector<std::string>& names,
            const std::vector<std::string>& colors) {
  for (size_t i = 0; i < names.size(); ++i) {
    const double top = y + 20.0 * static_cast<double>(i);
    doc.rect(x, top, 14, 10, colors[i], "legend");
    doc.text(x + 20, top + 9, names[i], 12);
  }
}

Ticks fitted_ticks(double lo, double hi) {
  double margin = 0.05 * (hi - lo);
  if (!(margin > 0.0)) margin = hi != 0.0 ? 0.05 * std::abs(hi) : 0.5;
  double bottom = lo - margin;
  if (lo >= 0.0 && bottom < 0.0) bottom = 0.0;
  return nice_ticks(bottom, hi + margin);
}

namespace {

std::string value_text(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

}  // namespace

void line_chart(Document& doc, const Rect& plot, const Ticks& x, const std::string& title,
                const std::string& x_label, const std::string& y_label,
                const std::vector<Series>& series) {
  double lo = 0.0, hi = 0.0;
  bool any = false;
  for (const Series& s : series) {
    for (const auto& p : s.points) {
      lo = any ? std::min(lo, p.second) : p.second;
      hi = any ? std::max(hi, p.second) : p.second;
      any = true;
    }
  }
  const Ticks y = fitted_ticks(lo, hi);
  doc.text(plot.x, plot.y - 12, title, 14, "start", 0.0, true);
  axes(doc, plot, &x, y, x_label, y_label);
  std::vector<std::string> names, colors;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::vector<std::pair<double, double>> pixels;
    for (const auto& p : s.points) {
      pixels.emplace_back(x_pixel(plot, x, p.first), y_pixel(plot, y, p.second));
    }
    doc.polyline(pixels, s.color, "curve", s.name);
    for (size_t i = 0; i < pixels.size(); ++i) {
      const auto& p = pixels[i];
      if (s.label_points) {
        const std::string value = value_text(s.points[i].second);
        doc.circle(p.first, p.second, 4, s.color, "value-marker", s.name + ": " + value);
        doc.text(p.first, p.second - 8, value, 10, "middle", 0.0, false, "value-label");
      } else if (pixels.size() <= 40) {
        doc.rect(p.first - 2, p.second - 2, 4, 4, s.color, "marker");
      }
    }
    doc.text(pixels.back().first + 6, pixels.back().second + 4, value_text(s.points.back().second),
             11, "start", 0.0, true, "last-value");
    names.push_back(s.name);
    colors.push_back(s.color);
  }
  legend(doc, plot.x + plot.w + 70, plot.y, names, colors);
}

void bar_chart(Document& doc, const Rect& plot, const std::string& title,
               const std::vector<std::string>& groups, const std::vector<std::string>& names,
               const std::vector<std::vector<double>>& values, const std::string& y_label,
               double y_floor_hi) {
  double lo = 0.0, hi = y_floor_hi;
  for (const std::vector<double>& row : values) {
    for (double v : row) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  const Ticks y = nice_ticks(lo, hi);
  doc.text(plot.x, plot.y - 12, title, 14, "start", 0.0, true);
  axes(doc, plot, nullptr, y, "", y_label);
  const double group_w = plot.w / static_cast<double>(groups.size());
  const double bar_w = 0.8 * group_w / static_cast<double>(std::max<size_t>(names.size(), 1));
  const double zero = y_pixel(plot, y, 0.0);
  std::vector<std::string> colors;
  for (size_t s = 0; s < names.size(); ++s) colors.push_back(palette(s));
  for (size_t g = 0; g < groups.size(); ++g) {
    const double left = plot.x + group_w * static_cast<double>(g) + 0.1 * group_w;
    for (size_t s = 0; s < names.size(); ++s) {
      const double v = values[s][g];
      const double top = y_pixel(plot, y, v);
      char label[64];
      std::snprintf(label, sizeof label, ": %.2f", v);
      doc.rect(left + bar_w * static_cast<double>(s), std::min(top, zero), bar_w,
               std::abs(zero - top), colors[s], "bar", names[s] + " " + groups[g] + label);
      if (std::abs(zero - top) < 1.0) {  // a 0: a visible line on the zero line and its value
        doc.rect(left + bar_w * static_cast<double>(s), zero - 2, bar_w, 4, colors[s], "zero-bar");
      }
      if (g + 1 == groups.size() || std::abs(zero - top) < 1.0) {
        // The last group's values (and every 0) written above the bars.
        std::snprintf(label, sizeof label, "%.1f", v);
        doc.text(left + bar_w * (static_cast<double>(s) + 0.5), std::min(top, zero) - 4, label, 10,
                 "middle");
      }
    }
    doc.text(plot.x + group_w * (static_cast<double>(g) + 0.5), plot.y + plot.h + 18, groups[g], 12,
             "middle");
  }
  doc.line(plot.x, zero, plot.x + plot.w, zero, "#333333");
  legend(doc, plot.x + plot.w + 20, plot.y, names, colors);
}

}  // namespace dml::svg
