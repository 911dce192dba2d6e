// dml report --cost-ers: the ERS against the training cost, one point per `dml aggregate` row (a
// config over its seeds), one line per --input (a configuration over its cost settings, e.g. HM's
// eta sweep), as the Hardness Manipulation paper's Figs. 6 to 8 (docs/report.md).
//
//   dml report --cost-ers --input LABEL=aggregate.json [--input ...] --out FILE.svg
//
// Layout (pixels): 960 x 470, plot at x = 80..760, y = 80..380, legend from x = 830, the caption
// (ERS profile and image count) at y = 450. x: passes per batch from 0 to nice_ticks' end above
// the largest mean + std; y: ERS in % likewise. Each point is a <circle class="point"> at (mean
// cost, mean ERS) with its row name written beside it (class "point-label"); error bars of one
// sample std (class "error-bar", vertical for the ERS, horizontal for the cost) where the seeds
// give one and it is not 0; a line joins an input's points in the order of their cost.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/file_io.h"
#include "kernels/common/check.h"
#include "tools/dml/output_files.h"
#include "tools/dml/report.h"
#include "tools/dml/result_json.h"
#include "tools/dml/svg.h"

namespace dml {

namespace {

// "profile rob28, 10000 images, robrank_compat true" from an ers_conditions object's JSON text.
std::string condition_text(const std::string& dumped) {
  const nlohmann::json c = nlohmann::json::parse(dumped, nullptr, false);
  if (!c.is_object()) return dumped;
  auto field = [&](const char* key) {
    if (!c.contains(key) || c.at(key).is_null()) return std::string("?");
    return c.at(key).is_string() ? c.at(key).get<std::string>() : c.at(key).dump();
  };
  return "profile " + field("profile") + ", " + field("images") + " images, robrank_compat " +
         field("robrank_compat");
}

std::string cost_ers_svg(const std::vector<CostSeries>& series,
                         const std::set<std::string>& conditions) {
  double cost_hi = 0.0, ers_hi = 0.0;
  for (const CostSeries& s : series) {
    for (const CostPoint& p : s.points) {
      cost_hi = std::max(cost_hi, p.cost + p.cost_std.value_or(0.0));
      ers_hi = std::max(ers_hi, p.ers + p.ers_std.value_or(0.0));
    }
  }
  svg::Document doc(960, 470);
  doc.text(20, 28, "ERS against training cost (mean ± sample std over seeds)", 16, "start", 0.0,
           true);
  const svg::Rect plot{80, 80, 680, 300};
  const svg::Ticks x = svg::nice_ticks(0.0, cost_hi);
  const svg::Ticks y = svg::nice_ticks(0.0, ers_hi);
  svg::axes(doc, plot, &x, y, "training cost (forward/backward passes per batch)", "ERS (%)");
  std::vector<std::string> names, colors;
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string& color = svg::palette(i);
    std::vector<std::pair<double, double>> line;
    for (const CostPoint& p : series[i].points) {
      const double px = svg::x_pixel(plot, x, p.cost), py = svg::y_pixel(plot, y, p.ers);
      line.emplace_back(px, py);
      if (p.ers_std && *p.ers_std > 0.0) {
        const double lo = svg::y_pixel(plot, y, p.ers - *p.ers_std);
        const double hi = svg::y_pixel(plot, y, p.ers + *p.ers_std);
        doc.polyline({{px - 4, lo}, {px + 4, lo}, {px, lo}, {px, hi}, {px - 4, hi}, {px + 4, hi}},
                     color, "error-bar");
      }
      if (p.cost_std && *p.cost_std > 0.0) {
        const double lo = svg::x_pixel(plot, x, p.cost - *p.cost_std);
        const double hi = svg::x_pixel(plot, x, p.cost + *p.cost_std);
        doc.polyline({{lo, py - 4}, {lo, py + 4}, {lo, py}, {hi, py}, {hi, py - 4}, {hi, py + 4}},
                     color, "error-bar");
      }
      auto with_std = [](double mean, const std::optional<double>& std) {
        return svg::number(mean) + (std ? " ± " + svg::number(*std) : "");
      };
      doc.circle(px, py, 4, color, "point",
                 series[i].label + " " + p.name + ": cost " + with_std(p.cost, p.cost_std) +
                     " passes/batch, ERS " + with_std(p.ers, p.ers_std) + " (" +
                     std::to_string(p.seeds) + (p.seeds == 1 ? " seed)" : " seeds)"));
      doc.text(px + 7, py - 6, p.name, 10, "start", 0.0, false, "point-label");
    }
    if (line.size() > 1) doc.polyline(line, color, "curve");
    names.push_back(series[i].label);
    colors.push_back(color);
  }
  svg::legend(doc, plot.x + plot.w + 70, plot.y, names, colors);
  std::string caption;
  for (const std::string& c : conditions) {
    caption += (caption.empty() ? "ERS: " : "; ") + condition_text(c);
  }
  if (conditions.size() > 1) caption += " (differ: the scores do not compare)";
  doc.text(20, 450, caption, 12, "start", 0.0, false, "caption");
  return doc.str();
}

}  // namespace

int run_report_cost_ers(Args& args) {
  std::vector<std::pair<std::string, std::string>> inputs;  // label, file
  for (const std::string& value : args.take_all("--input")) {
    const size_t eq = value.find('=');
    std::string label = eq == std::string::npos ? "" : value.substr(0, eq);
    const std::string file = eq == std::string::npos ? value : value.substr(eq + 1);
    if (file.empty()) throw UsageError("--input: no file in '" + value + "'");
    if (label.empty()) label = std::filesystem::path(file).stem().string();
    inputs.emplace_back(label, file);
  }
  const std::string out = args.take_string("--out");
  args.finish();
  if (inputs.empty())
    throw UsageError("--cost-ers needs at least one --input LABEL=aggregate.json");
  if (out.empty()) throw UsageError("--out needs a file name");
  check_replaceable_file(out, "--out");
  for (const auto& input : inputs) require_input_file(input.second, "--input");
  std::vector<CostSeries> series;
  std::set<std::string> conditions;
  for (const auto& input : inputs) {
    series.push_back(parse_cost_series(input.first, read_result_file(input.second), input.second));
    conditions.insert(series.back().conditions.begin(), series.back().conditions.end());
  }
  if (conditions.size() > 1) {
    std::fprintf(stderr,
                 "dml report: warning: the inputs' ERS were measured under different conditions: "
                 "their scores do not compare\n");
  }
  engine::detail::write_file_atomically(out, cost_ers_svg(series, conditions));
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace dml
