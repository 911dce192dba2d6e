// dml report --robustness: several models side by side in one SVG (docs/report.md, "Robustness
// figure"): the ERS bars, the worst-case summary, and the attack-strength curves of every ERS
// column against eps and against the number of steps, with the image counts and attack modes in
// the caption.
//
//   dml report --robustness --input LABEL=FILE[,FILE] [--input ...] --out FILE.svg
//
// Each FILE is a `dml ers --out` JSON: a finished rob28 / rob224 result (the ERS, and its
// "worst_case" when the run computed one) or a curve28 / curve224 result (its "curve").
//
// Layout (pixels), 960 wide: a 40-pixel title band; the caption, 16 + 16 (2 M + 1) for M models;
// then a 330-pixel band with the ERS bars (plot x = 70..650) and the worst case (plot x =
// 750..930), both plots 220 high from 60 below the band's top; then the curves: a 30-pixel
// heading and two rows of 170 pixels per sweep (eps, then steps), five panels of 192 pixels per
// row, each plot 130 x 100 from (panel left + 44, row top + 26).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "attacks/curve_profiles.h"
#include "attacks/profiles.h"
#include "engine/io/file_io.h"
#include "kernels/common/check.h"
#include "metrics/ers.h"
#include "tools/dml/commands.h"
#include "tools/dml/output_files.h"
#include "tools/dml/report.h"
#include "tools/dml/result_json.h"
#include "tools/dml/svg.h"

namespace dml {
namespace {

// 0.301961 -> "77/255"; a budget that is not a whole number of 1/255 as "%.5g".
std::string in_255(double value) {
  char buffer[32];
  const double k = value * 255.0;
  if (std::abs(k - std::nearbyint(k)) < 0.02) {
    std::snprintf(buffer, sizeof buffer, "%.0f/255", k);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.5g", value);
  }
  return buffer;
}

// "rob28: 10000 images of fashion-mnist:test, metric N, eps 77/255, 32 steps of 3/255, ..." from a
// result's header and its first attack's spec.
std::string mode_text(const ResultHeader& h, const std::string& restarts) {
  std::string text =
      h.profile + ": " + h.images + " images of " + h.dataset + ", metric " + h.metric;
  if (h.first_attack) {
    const attacks::AttackSpec& spec = *h.first_attack;
    if (attacks::is_ers_profile(h.profile)) {
      text += ", eps " + in_255(spec.pgd.eps) + ", " + std::to_string(spec.pgd.steps) +
              " steps of " + in_255(spec.pgd.alpha);
    }
    text += spec.pgd.random_start ? ", random start" : ", no random start";
  }
  text += ", " + restarts + ", seed " + h.seed + ", robrank-compat " +
          (h.robrank_compat_on ? "on" : "off");
  if (!h.complete) text += ", INCOMPLETE";
  return text;
}

// The caption: one colour swatch per model with its files' modes. Returns the y below it.
double draw_caption(svg::Document& doc, const std::vector<RobustnessModel>& models, double top) {
  double y = top;
  doc.text(20, y + 12,
           "Scores are ERS columns normalized to higher = more robust (0-100, metrics/ers.h); "
           "each model's files:",
           12);
  y += 16;
  for (size_t m = 0; m < models.size(); ++m) {
    const RobustnessModel& model = models[m];
    doc.rect(20, y + 3, 14, 10, svg::palette(m), "legend");
    doc.text(40, y + 12, model.label, 12, "start", 0.0, true);
    const std::string restarts = model.worst_case_restarts
                                     ? "worst case over " + *model.worst_case_restarts + " restarts"
                                     : "1 run per attack";
    const std::string ers = model.ers_path.empty() ? "ERS: no rob28/rob224 file"
                                                   : "ERS " + mode_text(model.ers_header, restarts);
    const std::string curve = model.curve_path.empty()
                                  ? "curves: no curve28/curve224 file"
                                  : "curves " + mode_text(model.curve_header, "1 run per attack") +
                                        ", " + std::to_string(model.curve.size()) + " points";
    doc.text(130, y + 12, ers, 11);
    doc.text(130, y + 28, curve, 11);
    y += 32;
  }
  return y + 16;
}

// Grouped bars with one colour per model (palette(model)); a missing value (NaN) is written
// "n/c" (not computed) at its slot. Every value is written above its bar (turned upright when the
// bar is narrower than 26 pixels).
void model_bars(svg::Document& doc, const svg::Rect& plot, const std::string& title,
                const std::vector<std::string>& groups, const std::vector<std::string>& names,
                const std::vector<std::vector<double>>& v, const std::string& y_label) {
  double lo = 0.0, hi = 100.0;
  for (const auto& row : v) {
    for (double x : row) {
      if (std::isnan(x)) continue;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  const svg::Ticks y = svg::nice_ticks(lo, hi);
  doc.text(plot.x, plot.y - 12, title, 14, "start", 0.0, true);
  svg::axes(doc, plot, nullptr, y, "", y_label);
  const double group_w = plot.w / static_cast<double>(groups.size());
  const double bar_w = 0.8 * group_w / static_cast<double>(std::max<size_t>(v.size(), 1));
  const double zero = svg::y_pixel(plot, y, 0.0);
  for (size_t g = 0; g < groups.size(); ++g) {
    const double left = plot.x + group_w * static_cast<double>(g) + 0.1 * group_w;
    for (size_t m = 0; m < v.size(); ++m) {
      const double x = left + bar_w * (static_cast<double>(m) + 0.5);
      char label[64];
      if (std::isnan(v[m][g])) {
        doc.text(x, zero - 4, "n/c", 9, "middle");
        continue;
      }
      const double top = svg::y_pixel(plot, y, v[m][g]);
      std::snprintf(label, sizeof label, "%.1f", v[m][g]);
      doc.rect(left + bar_w * static_cast<double>(m), std::min(top, zero), bar_w,
               std::max(std::abs(zero - top), 1.0), svg::palette(m), "bar",
               names[m] + " " + groups[g] + ": " + label);
      if (bar_w >= 26.0) {
        doc.text(x, std::min(top, zero) - 4, label, 9, "middle");
      } else {  // narrow bars: the value upright above its bar, so that neighbours do not collide
        doc.text(x + 3, std::min(top, zero) - 3, label, 9, "start", -90.0);
      }
    }
    doc.text(plot.x + group_w * (static_cast<double>(g) + 0.5), plot.y + plot.h + 18, groups[g], 11,
             "middle");
  }
  doc.line(plot.x, zero, plot.x + plot.w, zero, "#333333");
}

void draw_ers_band(svg::Document& doc, const std::vector<RobustnessModel>& models, double top) {
  std::vector<std::string> groups(metrics::ers_column_names().begin(),
                                  metrics::ers_column_names().end());
  groups.push_back("ERS");
  std::vector<std::vector<double>> values;
  for (const RobustnessModel& model : models) {
    std::vector<double> row(groups.size(), std::nan(""));
    if (model.ers_raw) {
      const metrics::ErsRow normalized = metrics::ers_normalized(*model.ers_raw);
      std::copy(normalized.begin(), normalized.end(), row.begin());
      row.back() = metrics::empirical_robustness_score(*model.ers_raw);
    }
    values.push_back(row);
  }
  std::vector<std::string> names;
  for (const RobustnessModel& model : models) names.push_back(model.label);
  model_bars(doc, svg::Rect{70, top + 60, 580, 220}, "ERS: normalized columns and their mean",
             groups, names, values, "score");

  // The worst case, as `dml ers --worst-case R` writes it (docs/attacks.md, "Worst case per
  // query"): the ERS of the columns' worst means, and the robust fraction (as %) of one run and of
  // the worst over the attacks and restarts. NaN (drawn "n/c") where a file lacks a value.
  const std::vector<std::string> keys = {"ERS worst", "robust % 1 run", "robust % worst"};
  const svg::Rect plot{750, top + 60, 180, 220};
  bool any = false;
  std::vector<std::vector<double>> worst;
  for (const RobustnessModel& model : models) {
    worst.emplace_back(model.worst_case.begin(), model.worst_case.end());
    for (double v : worst.back()) any = any || !std::isnan(v);
  }
  if (!any) {
    doc.text(plot.x, plot.y - 12, "worst case", 14, "start", 0.0, true);
    doc.rect(plot.x, plot.y, plot.w, plot.h, "#f4f4f4", "not-computed");
    doc.text(plot.x + plot.w / 2, plot.y + plot.h / 2, "not computed", 14, "middle");
    doc.text(plot.x + plot.w / 2, plot.y + plot.h / 2 + 18, "(no \"worst_case\" in the ERS files)",
             9, "middle");
    return;
  }
  model_bars(doc, plot, "worst case", keys, names, worst, "");
}

// One small panel: a column's score against eps (or steps, on a log2 axis), one line per model.
// In the eps panels a dashed grey line marks `profile_eps` (the steps sweep's budget) when known.
void curve_panel(svg::Document& doc, const svg::Rect& plot, const std::string& column,
                 const std::string& sweep, double profile_eps,
                 const std::vector<RobustnessModel>& models) {
  const bool log_x = sweep == "steps";
  svg::Ticks x;
  if (log_x) {
    x.lo = 0.0;  // log2(1)
    x.hi = 7.0;  // log2(128)
    x.values = {0.0, 3.0, 5.0, 7.0};
  } else {
    x = svg::nice_ticks(0.0, 1.0, 4);
  }
  double lo = 0.0, hi = 100.0;
  for (const RobustnessModel& model : models) {
    for (const CurvePoint& p : model.curve) {
      if (p.sweep == sweep && p.column == column) {
        lo = std::min(lo, p.score);
        hi = std::max(hi, p.score);
      }
    }
  }
  const svg::Ticks y = svg::nice_ticks(lo, hi, 4);
  doc.text(plot.x + plot.w / 2, plot.y - 8, column, 12, "middle", 0.0, true);
  svg::axes(doc, plot, log_x ? nullptr : &x, y, "", "");
  if (!log_x && profile_eps > 0.0) {
    const double px = svg::x_pixel(plot, x, profile_eps);
    doc.line(px, plot.y, px, plot.y + plot.h, "#999999", 1.0, true);
  }
  if (log_x) {
    for (double v : x.values) {
      const double px = svg::x_pixel(plot, x, v);
      doc.line(px, plot.y + plot.h, px, plot.y + plot.h + 5, "#333333");
      doc.text(px, plot.y + plot.h + 18, std::to_string(1 << static_cast<int>(v)), 11, "middle");
    }
  }
  for (size_t m = 0; m < models.size(); ++m) {
    std::vector<std::pair<double, double>> data;
    for (const CurvePoint& p : models[m].curve) {
      if (p.sweep == sweep && p.column == column) {
        data.emplace_back(log_x ? std::log2(p.x) : p.x, p.score);
      }
    }
    if (data.empty()) continue;
    std::sort(data.begin(), data.end());
    std::vector<std::pair<double, double>> pixels;
    for (const auto& [dx, dy] : data) {
      pixels.emplace_back(svg::x_pixel(plot, x, dx), svg::y_pixel(plot, y, dy));
    }
    doc.polyline(pixels, svg::palette(m), "curve", models[m].label + " " + column);
    for (const auto& [px, py] : pixels)
      doc.rect(px - 1.5, py - 1.5, 3, 3, svg::palette(m), "marker");
  }
}

double draw_curves(svg::Document& doc, const std::vector<RobustnessModel>& models, double top) {
  // The budget of the steps sweep, for its heading: the eps of the first model's steps points.
  double profile_eps = 0.0;
  for (const RobustnessModel& model : models) {
    if (model.curve_path.empty() || profile_eps > 0.0) continue;
    profile_eps = model.steps_eps;
  }
  const std::string steps_eps =
      profile_eps > 0.0 ? "eps " + in_255(profile_eps) + " (dashed above)" : "the profile's eps";
  const std::vector<std::pair<std::string, std::string>> sweeps = {
      {"eps",
       "Attack strength against eps (32 steps of alpha = max(1/255, round(255 eps/25)/255))"},
      {"steps", "Attack strength against the number of steps (log axis), at " + steps_eps}};
  double y = top;
  for (const auto& [sweep, heading] : sweeps) {
    doc.text(20, y + 20, heading, 14, "start", 0.0, true);
    y += 30;
    const auto& columns = metrics::ers_column_names();
    for (size_t c = 0; c < columns.size(); ++c) {
      const double left = 192.0 * static_cast<double>(c % 5);
      const double row_top = y + 170.0 * static_cast<double>(c / 5);
      curve_panel(doc, svg::Rect{left + 44, row_top + 26, 130, 100}, columns[c], sweep, profile_eps,
                  models);
    }
    y += 2 * 170;
  }
  return y;
}

// Models whose ERS (or curve) files were attacked on other images, another profile or with
// robrank's definitions do not compare bar for bar: a warning on stderr (the caption shows it too).
void warn_if_not_comparable(const std::vector<RobustnessModel>& models) {
  auto conditions = [](const ResultHeader& h) {
    return h.profile + ", " + h.images + " images of " + h.dataset + ", robrank_compat " +
           h.robrank_compat;
  };
  for (const char* kind : {"ERS", "curve"}) {
    const bool ers = std::string(kind) == "ERS";
    const RobustnessModel* first = nullptr;
    for (const RobustnessModel& model : models) {
      if ((ers ? model.ers_path : model.curve_path).empty()) continue;
      if (first == nullptr) {
        first = &model;
        continue;
      }
      const std::string mine = conditions(ers ? model.ers_header : model.curve_header);
      const std::string its = conditions(ers ? first->ers_header : first->curve_header);
      if (mine != its) {
        std::fprintf(stderr,
                     "dml report: warning: the %s results of '%s' (%s) and '%s' (%s) were attacked "
                     "under different conditions: they do not compare\n",
                     kind, model.label.c_str(), mine.c_str(), first->label.c_str(), its.c_str());
      }
    }
  }
}

// "LABEL=FILE[,FILE]" or "FILE[,FILE]" (label: the first file's stem).
std::pair<std::string, std::vector<std::string>> parse_input(const std::string& value) {
  const size_t equals = value.find('=');
  std::string label, files_text = value;
  if (equals != std::string::npos) {
    label = value.substr(0, equals);
    files_text = value.substr(equals + 1);
    if (label.empty()) throw UsageError("--input: an empty label in '" + value + "'");
  }
  const std::vector<std::string> files = split_commas(files_text);  // "a,," -> {"a", "", ""}
  const bool any_empty = std::find(files.begin(), files.end(), "") != files.end();
  if (files.empty() || any_empty) {
    throw UsageError("--input: an empty file name in '" + value + "'");
  }
  if (label.empty()) label = std::filesystem::path(files.front()).stem().string();
  return {label, files};
}

}  // namespace

int run_report_robustness(Args& args) {
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs;
  for (const std::string& value : args.take_all("--input")) inputs.push_back(parse_input(value));
  const std::string out = args.take_string("--out");
  args.finish();
  if (inputs.empty()) throw UsageError("--robustness needs at least one --input LABEL=FILE");
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t k = 0; k < i; ++k) {
      if (inputs[k].first == inputs[i].first) {
        throw UsageError("--input: the label '" + inputs[i].first + "' is given twice");
      }
    }
  }
  check_replaceable_file(out, "--out");
  for (const auto& input : inputs) {
    for (const std::string& file : input.second) require_input_file(file, "--input");
  }
  std::vector<RobustnessModel> models;
  for (const auto& [label, files] : inputs) {
    RobustnessModel model;
    model.label = label;
    for (const std::string& file : files) {
      add_robustness_file(model, read_result_file(file), file);
    }
    models.push_back(std::move(model));
  }
  warn_if_not_comparable(models);

  const double caption_height = 16.0 + 16.0 + 32.0 * static_cast<double>(models.size());
  const double ers_top = 40.0 + caption_height;
  const double curves_top = ers_top + 330.0;
  svg::Document doc(960, curves_top + 2 * (30 + 2 * 170) + 10);
  doc.text(20, 28,
           "Robustness of " + std::to_string(models.size()) +
               " model(s): ERS, worst case and attack-strength curves",
           16, "start", 0.0, true);
  draw_caption(doc, models, 40);
  draw_ers_band(doc, models, ers_top);
  draw_curves(doc, models, curves_top);
  engine::detail::write_file_atomically(out, doc.str());

  for (const RobustnessModel& model : models) {
    char ers[32] = "-";
    if (model.ers_raw) {
      std::snprintf(ers, sizeof ers, "%.1f", metrics::empirical_robustness_score(*model.ers_raw));
    }
    // The worst case's summary number (the whole object, with its per-image lists, was printed).
    char worst[32] = "not computed";
    if (model.has_worst_case && !std::isnan(model.worst_case[0])) {
      std::snprintf(worst, sizeof worst, "%.1f", model.worst_case[0]);
    }
    std::printf("%-16s ERS %s, worst-case ERS %s, %zu curve points\n", model.label.c_str(), ers,
                worst, model.curve.size());
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace dml
