// dml aggregate: mean and standard deviation over seeds of what tools/seeds.sh (or tools/repro.sh
// per seed) wrote, as a Markdown table, a JSON file and an SVG figure (docs/report.md, "Runs over
// seeds").
//
//   dml aggregate --runs DIR[,DIR...] [--runs ...] [--names a,b,...] --out PREFIX
//
// One row per --runs (a config over its seeds), one seed per DIR. A DIR is a tools/repro.sh
// output (DIR/run/metrics.json, DIR/ers.json) or a `dml train` output_dir (DIR/metrics.json,
// DIR/ers.json if there is one).
//
// Columns from each seed's metrics.json: R@1, mAP, NMI (always), mAP@R, pi_ratio and the training
// cost in forward/backward passes per batch, `passes` / `steps` (written by dml train since the
// defenses exist: eta + 1 per batch for a PGD defense, 1 without one; docs/defenses.md). The last
// three are shown when some seed has them; a row whose seeds disagree is an error. NMI's
// clustering (`kmeans_restarts`, 1 when absent) is said under the table; a row's seeds must agree.
//
// The standard deviation is the sample one, sqrt(sum (x - mean)^2 / (n - 1)), as papers mean by
// their "mean ± std" over seeds; with one seed it is undefined (JSON null, "–" in the table).
//
// Figure layout (pixels): 960 x 440, plot at x = 80..760, y = 80..380, legend from x = 830.
// Groups R@1, mAP, mAP@R (when shown), NMI (%), the ten normalized ERS columns and the ERS, all on
// 0-100 ("higher is better" for the normalized columns, metrics/ers.h); per row a bar to the mean
// (class "bar"), a whisker from mean - std to mean + std (class "whisker") and one dot per seed
// (class "seed").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

namespace fs = std::filesystem;

const char kUsage[] =
    "usage: dml aggregate --runs DIR[,DIR...] [--runs ...] [--names a,b,...] --out PREFIX\n"
    "\n"
    "Mean and sample standard deviation (n - 1) over seeds of R@1, mAP, mAP@R, NMI (%),\n"
    "pi_ratio and the training cost in forward/backward passes per batch (passes / steps; from\n"
    "metrics.json), the ERS and its ten raw columns (from a complete ers.json), one row per\n"
    "--runs (a config over its seeds, one folder per seed: a tools/repro.sh or tools/seeds.sh\n"
    "output with run/metrics.json, or a `dml train` output_dir). Writes PREFIX.md (the table),\n"
    "PREFIX.json and PREFIX.svg (bars at the means, whiskers of one std, a dot per seed);\n"
    "they are replaced if they exist. docs/report.md, \"Runs over seeds\".\n"
    "\n"
    "  --runs LIST         comma-separated seed folders of one row; repeat for more rows\n"
    "  --names LIST        comma-separated row names (default: each row's first folder's parent\n"
    "                      folder name, e.g. act for runs/seeds/act/seed-0)\n"
    "  --out PREFIX        output path without extension (required)\n";

std::vector<Column> ers_columns() {
  std::vector<Column> columns = {{"ERS", 1}};
  for (const std::string& name : metrics::ers_column_names()) {
    columns.push_back({name, name == "TMA" || name == "ES:D" ? 3 : 1});
  }
  return columns;
}

struct Row {
  std::string name;
  std::vector<std::string> dirs;
  std::vector<SeedResult> seeds;
};

// The metrics file of a seed folder: DIR/run/metrics.json (tools/repro.sh) or DIR/metrics.json.
std::string metrics_path(const std::string& dir) {
  const std::string repro = (fs::path(dir) / "run" / "metrics.json").string();
  std::error_code error;
  if (fs::exists(repro, error)) return repro;
  return (fs::path(dir) / "metrics.json").string();
}

SeedResult read_seed(const std::string& dir) {
  const std::string path = metrics_path(dir);
  const std::string ers_path = (fs::path(dir) / "ers.json").string();
  std::error_code error;
  const std::optional<std::string> ers_text =
      fs::exists(ers_path, error) ? std::optional<std::string>(read_result_file(ers_path))
                                  : std::nullopt;
  return parse_seed_result(read_result_file(path), path, ers_text, ers_path);
}

struct Stats {
  std::vector<double> values;
  double mean = 0.0;
  std::optional<double> std;  // sample standard deviation; none for one value
};

Stats stats_of(std::vector<double> values) {
  Stats s;
  double sum = 0.0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  if (values.size() > 1) {
    double squares = 0.0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  s.values = std::move(values);
  return s;
}

// The metric columns (indices into metric_columns()) that the table shows: the required ones and
// each optional one that some seed recorded.
std::vector<size_t> shown_metric_columns(const std::vector<Row>& rows) {
  const std::vector<MetricColumn> all = metric_columns();
  std::vector<size_t> shown;
  for (size_t c = 0; c < all.size(); ++c) {
    bool recorded = !all[c].optional;
    for (const Row& row : rows) recorded = recorded || row.seeds.front().metrics[c].has_value();
    if (recorded) shown.push_back(c);
  }
  return shown;
}

// Each column's statistics over the row's seeds, in the order `metrics` (indices into
// metric_columns(); none where the row did not record it) then, if the seeds have ERS files,
// ers_columns(); `normalized` also gets the figure's 0-100 values.
std::vector<std::optional<Stats>> row_stats(const Row& row, const std::vector<size_t>& metrics,
                                            bool normalized) {
  std::vector<std::optional<Stats>> out;
  const size_t n = row.seeds.size();
  for (size_t c : metrics) {
    if (!row.seeds.front().metrics[c]) {
      out.push_back(std::nullopt);
      continue;
    }
    std::vector<double> v;
    for (const SeedResult& s : row.seeds) v.push_back(*s.metrics[c]);
    out.push_back(stats_of(v));
  }
  if (!row.seeds.front().has_ers) return out;
  std::vector<double> ers(n);
  std::vector<std::vector<double>> columns(metrics::kErsColumns, std::vector<double>(n));
  for (size_t i = 0; i < n; ++i) {
    ers[i] = metrics::empirical_robustness_score(row.seeds[i].ers_raw);
    const metrics::ErsRow values =
        normalized ? metrics::ers_normalized(row.seeds[i].ers_raw) : row.seeds[i].ers_raw;
    for (size_t c = 0; c < columns.size(); ++c) columns[c][i] = values[c];
  }
  out.push_back(stats_of(ers));
  for (const std::vector<double>& v : columns) out.push_back(stats_of(v));
  return out;
}

std::string format_cell(const Stats& s, int digits) {
  char text[64];
  if (s.std) {
    std::snprintf(text, sizeof text, "%.*f ± %.*f", digits, s.mean, digits, *s.std);
  } else {
    std::snprintf(text, sizeof text, "%.*f ± –", digits, s.mean);
  }
  return text;
}

// The table's columns: the shown metric columns, then the ERS columns if `ers`.
std::vector<Column> table_columns(const std::vector<size_t>& metrics, bool ers) {
  std::vector<Column> columns;
  for (size_t c : metrics) columns.push_back(metric_columns()[c].column);
  if (ers) {
    for (const Column& c : ers_columns()) columns.push_back(c);
  }
  return columns;
}

// How the rows' NMI was clustered (docs/metrics.md): one k-means++ run per evaluation, or the
// least-inertia of R runs; rows that differ are named with theirs.
std::string nmi_clustering_text(const std::vector<Row>& rows) {
  const auto runs = [](const Row& row) {
    const int64_t r = row.seeds.front().kmeans_restarts;  // the row's seeds agree (checked)
    return r == 1 ? std::string("one k-means++ run")
                  : "the least-inertia of " + std::to_string(r) + " k-means++ runs";
  };
  bool same = true;
  for (const Row& row : rows) same = same && runs(row) == runs(rows.front());
  if (same) return "NMI from " + runs(rows.front()) + " per evaluation.";
  std::string text = "NMI from";
  for (size_t r = 0; r < rows.size(); ++r) {
    text += (r == 0 ? " " : "; ") + runs(rows[r]) + " (" + rows[r].name + ")";
  }
  return text + " per evaluation: NMI from different clusterings compares loosely.";
}

std::string markdown_table(const std::vector<Row>& rows, bool any_ers) {
  const std::vector<size_t> metrics = shown_metric_columns(rows);
  std::vector<Column> columns = table_columns(metrics, false);
  if (any_ers) {
    for (const Column& c : ers_columns()) columns.push_back(c);
  }
  std::string md = "| run | seeds |";
  std::string rule = "|---|---:|";
  for (const Column& c : columns) {
    md += " " + c.name + " |";
    rule += "---:|";
  }
  md += "\n" + rule + "\n";
  for (const Row& row : rows) {
    md += "| " + row.name + " | " + std::to_string(row.seeds.size()) + " |";
    const std::vector<std::optional<Stats>> stats = row_stats(row, metrics, false);
    for (size_t c = 0; c < columns.size(); ++c) {
      std::string cell = "not run";
      if (c < stats.size()) {
        cell = stats[c] ? format_cell(*stats[c], columns[c].digits) : "not recorded";
      }
      md += " " + cell + " |";
    }
    md += "\n";
  }
  md +=
      "\nMean ± sample standard deviation (n − 1) over the seeds; R@1, mAP, mAP@R, NMI and ERS in "
      "%, pi_ratio a ratio, passes/batch the training cost in forward/backward passes per batch, "
      "the attack columns raw as `dml ers` reports them. " +
      nmi_clustering_text(rows) + "\n";
  return md;
}

nlohmann::ordered_json stats_json(const Stats& s) {
  nlohmann::ordered_json j;
  j["mean"] = s.mean;
  j["std"] = s.std ? nlohmann::ordered_json(*s.std) : nlohmann::ordered_json(nullptr);
  j["values"] = s.values;
  return j;
}

nlohmann::ordered_json aggregate_json(const std::vector<Row>& rows) {
  nlohmann::ordered_json out;
  out["std"] = "sample standard deviation, sqrt(sum (x - mean)^2 / (n - 1)); null for one seed";
  out["units"] =
      "R@1, mAP, mAP@R, NMI, ERS in %; pi_ratio a ratio; passes/batch the training cost in "
      "forward/backward passes per batch; the ten attack columns raw, as dml ers reports them";
  out["rows"] = nlohmann::ordered_json::array();
  for (const Row& row : rows) {
    nlohmann::ordered_json r;
    r["name"] = row.name;
    r["seeds"] = row.seeds.size();
    r["runs"] = row.dirs;
    const std::vector<size_t> metrics = shown_metric_columns({row});
    const std::vector<std::optional<Stats>> stats = row_stats(row, metrics, false);
    const std::vector<Column> names = table_columns(metrics, row.seeds.front().has_ers);
    nlohmann::ordered_json columns;
    for (size_t c = 0; c < stats.size(); ++c) {
      if (stats[c]) columns[names[c].name] = stats_json(*stats[c]);
    }
    r["columns"] = columns;
    r["kmeans_restarts"] = row.seeds.front().kmeans_restarts;  // NMI's k-means++ runs
    // What makes ERS means comparable (dml report --cost-ers names it in its caption).
    if (row.seeds.front().has_ers) r["ers_conditions"] = row.seeds.front().ers_meta;
    out["rows"].push_back(r);
  }
  return out;
}

// The figure's groups: the shown metric columns in % (R@1, mAP, mAP@R, NMI; pi_ratio and the cost
// are on other scales), then (with ERS files) the ten normalized columns and ERS.
std::string aggregate_svg(const std::vector<Row>& rows, bool any_ers) {
  std::vector<size_t> percent;
  std::vector<std::string> groups;
  for (size_t c : shown_metric_columns(rows)) {
    if (metric_columns()[c].scale != 100.0) continue;
    percent.push_back(c);
    groups.push_back(metric_columns()[c].column.name);
  }
  if (any_ers) {
    for (const std::string& name : metrics::ers_column_names()) groups.push_back(name);
    groups.push_back("ERS");
  }
  // stats[row][group], in the groups' order (row_stats puts ERS before the columns).
  std::vector<std::vector<std::optional<Stats>>> stats;
  double lo = 0.0, hi = 100.0;
  const auto first_ers = static_cast<std::ptrdiff_t>(percent.size());
  for (const Row& row : rows) {
    std::vector<std::optional<Stats>> s = row_stats(row, percent, true);
    if (s.size() > percent.size()) {
      const std::optional<Stats> ers = s[percent.size()];
      s.erase(s.begin() + first_ers);
      s.push_back(ers);
    }
    for (const std::optional<Stats>& g : s) {
      if (!g) continue;
      for (double v : g->values) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    stats.push_back(s);
  }
  svg::Document doc(960, 440);
  doc.text(20, 28, "Mean and sample std over seeds (normalized ERS columns: higher = more robust)",
           16, "start", 0.0, true);
  const svg::Rect plot{80, 80, 680, 300};
  const svg::Ticks y = svg::nice_ticks(lo, hi);
  svg::axes(doc, plot, nullptr, y, "", "% (normalized score for the ERS columns)");
  const double group_w = plot.w / static_cast<double>(groups.size());
  const double bar_w = 0.8 * group_w / static_cast<double>(rows.size());
  const double zero = svg::y_pixel(plot, y, 0.0);
  for (size_t g = 0; g < groups.size(); ++g) {
    doc.text(plot.x + (static_cast<double>(g) + 0.5) * group_w, plot.y + plot.h + 16, groups[g], 11,
             "middle");
    for (size_t r = 0; r < rows.size(); ++r) {
      if (g >= stats[r].size() || !stats[r][g]) continue;  // a row without ERS files or mAP@R
      const Stats& s = *stats[r][g];
      const std::string& color = svg::palette(r);
      const double x0 = plot.x + static_cast<double>(g) * group_w + 0.1 * group_w +
                        static_cast<double>(r) * bar_w;
      const double top = svg::y_pixel(plot, y, s.mean);
      doc.rect(x0, std::min(top, zero), bar_w, std::abs(zero - top), color, "bar",
               rows[r].name + " " + groups[g] + " " + svg::number(s.mean));
      const double mid = x0 + bar_w / 2;
      if (s.std) {
        const double y_lo = svg::y_pixel(plot, y, s.mean - *s.std);
        const double y_hi = svg::y_pixel(plot, y, s.mean + *s.std);
        doc.line(mid, y_lo, mid, y_hi, "#000000", 1.5);
        doc.line(mid - bar_w / 4, y_lo, mid + bar_w / 4, y_lo, "#000000", 1.5);
        doc.line(mid - bar_w / 4, y_hi, mid + bar_w / 4, y_hi, "#000000", 1.5);
      }
      for (double v : s.values) {
        doc.circle(mid, svg::y_pixel(plot, y, v), 2.5, "#000000", "seed");
      }
    }
  }
  std::vector<std::string> names, colors;
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t n = rows[r].seeds.size();
    names.push_back(rows[r].name + " (" + std::to_string(n) + (n == 1 ? " seed)" : " seeds)"));
    colors.push_back(svg::palette(r));
  }
  svg::legend(doc, plot.x + plot.w + 70, plot.y, names, colors);
  return doc.str();
}

// Every seed of a row records the same optional metric columns (mAP@R, pi_ratio, the cost).
void check_same_metrics_recorded(const Row& row) {
  const std::vector<MetricColumn> all = metric_columns();
  for (size_t c = 0; c < all.size(); ++c) {
    for (size_t i = 1; i < row.seeds.size(); ++i) {
      const bool has = row.seeds[i].metrics[c].has_value();
      if (has == row.seeds.front().metrics[c].has_value()) continue;
      engine::fail("row ", row.name, ": ", metrics_path(row.dirs[has ? 0 : i]), " has no number \"",
                   all[c].key, "\" but ", metrics_path(row.dirs[has ? i : 0]),
                   " has one: every seed of a row needs it, or none");
    }
  }
}

// Every seed of a row clustered its NMI alike (a mean over different rules would hide it).
void check_same_kmeans_restarts(const Row& row) {
  for (size_t i = 1; i < row.seeds.size(); ++i) {
    if (row.seeds[i].kmeans_restarts == row.seeds.front().kmeans_restarts) continue;
    engine::fail("row ", row.name, ": ", metrics_path(row.dirs[0]), " has NMI from ",
                 row.seeds.front().kmeans_restarts, " k-means runs (\"kmeans_restarts\") but ",
                 metrics_path(row.dirs[i]), " from ", row.seeds[i].kmeans_restarts,
                 ": evaluate every seed of a row alike (dml eval --kmeans-restarts R)");
  }
}

// Warns when ERS files were attacked under different conditions: their means do not compare.
void warn_mixed_conditions(const std::vector<Row>& rows) {
  const SeedResult* first = nullptr;
  std::string first_dir;
  for (const Row& row : rows) {
    for (size_t i = 0; i < row.seeds.size(); ++i) {
      const SeedResult& s = row.seeds[i];
      if (!s.has_ers) continue;
      if (first == nullptr) {
        first = &s;
        first_dir = row.dirs[i];
      } else if (s.ers_conditions != first->ers_conditions) {
        std::fprintf(stderr,
                     "dml aggregate: warning: %s (%s) and %s (%s) were attacked under different "
                     "conditions: their scores do not compare\n",
                     row.dirs[i].c_str(), s.ers_conditions.c_str(), first_dir.c_str(),
                     first->ers_conditions.c_str());
      }
    }
  }
}

}  // namespace

int run_aggregate(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::vector<Row> rows;
  for (const std::string& value : args.take_all("--runs")) {
    Row row;
    for (const std::string& dir : split_commas(value)) {
      if (dir.empty()) throw UsageError("--runs: an empty folder name in '" + value + "'");
      row.dirs.push_back(dir);
    }
    rows.push_back(row);
  }
  const std::optional<std::string> names_text = args.take_optional("--names");
  const std::string prefix = args.take_string("--out");
  args.finish();
  if (rows.empty()) throw UsageError("give at least one --runs DIR[,DIR...]");
  if (prefix.empty()) throw UsageError("--out needs a path prefix");
  for (const char* ext : {".md", ".json", ".svg"}) check_replaceable_file(prefix + ext, "--out");
  if (names_text) {
    const std::vector<std::string> names = split_commas(*names_text);
    if (names.size() != rows.size()) {
      throw UsageError("--names: " + std::to_string(names.size()) + " names for " +
                       std::to_string(rows.size()) + " --runs");
    }
    for (size_t r = 0; r < rows.size(); ++r) rows[r].name = names[r];
  } else {
    for (Row& row : rows) {
      const fs::path first = fs::path(row.dirs.front()).lexically_normal();
      const fs::path dir = first.has_filename() ? first : first.parent_path();
      row.name = dir.parent_path().filename().string();
      if (row.name.empty()) row.name = dir.filename().string();
    }
  }
  for (const Row& row : rows) {
    for (const std::string& dir : row.dirs) {
      std::error_code error;
      if (!fs::is_directory(dir, error)) {
        throw UsageError("--runs: '" + dir + "' is not a folder (a seed's output folder)");
      }
      require_input_file(metrics_path(dir), "--runs (its metrics.json)");
    }
  }
  bool any_ers = false;
  for (Row& row : rows) {
    for (const std::string& dir : row.dirs) row.seeds.push_back(read_seed(dir));
    for (size_t i = 1; i < row.seeds.size(); ++i) {
      ENGINE_CHECK(row.seeds[i].has_ers == row.seeds.front().has_ers, "row ", row.name, ": ",
                   row.dirs[row.seeds[i].has_ers ? 0 : i], " has no ers.json but ",
                   row.dirs[row.seeds[i].has_ers ? i : 0],
                   " has one: every seed of a row needs its ERS, or none");
    }
    any_ers = any_ers || row.seeds.front().has_ers;
    check_same_metrics_recorded(row);
    check_same_kmeans_restarts(row);
  }
  warn_mixed_conditions(rows);

  const std::string md = markdown_table(rows, any_ers);
  engine::detail::write_file_atomically(prefix + ".md", md);
  engine::detail::write_file_atomically(prefix + ".json", aggregate_json(rows).dump(2) + "\n");
  engine::detail::write_file_atomically(prefix + ".svg", aggregate_svg(rows, any_ers));
  std::fputs(md.c_str(), stdout);
  std::printf("wrote %s.md, %s.json and %s.svg\n", prefix.c_str(), prefix.c_str(), prefix.c_str());
  return 0;
}

}  // namespace dml
