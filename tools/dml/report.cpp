// dml report: charts and retrieval grids as SVG/PNG (docs/report.md).
//
//   dml report --log RUN_DIR [--out FILE.svg]                 training curves of a `dml train` run
//   dml report --grid --checkpoint FILE --out FILE.png ...    retrieval grid (report_grid.cpp)
//   dml report --ers A.json [--ers B.json | ,B.json] [--names a,b] --out FILE.svg
//                                                             ERS components as grouped bars
//   dml report --attack SPEC --checkpoint FILE --out FILE.png  an attack's picture
//   (report_attack.cpp)
//   dml report --robustness --input LABEL=FILE[,FILE] ... --out FILE.svg
//                                                             several models' ERS, worst case and
//                                                             attack-strength curves
//                                                             (report_robustness.cpp)
//   dml report --cost-ers --input LABEL=aggregate.json ... --out FILE.svg
//                                                             ERS against training cost
//                                                             (report_cost.cpp)
//
// The SVG layouts (pixels; the mapping of data to pixels is in tools/dml/svg.h):
//   --log: 960 wide; a 40-pixel title band, then one 390-pixel band per panel (loss if the log has
//          train records, evaluation % if it has eval records), each with its plot at
//          x = 80..760, y = band top + 40 .. + 340. Both panels share the x axis (step, from 0).
//   --ers: 960 x 440, plot at x = 80..760, y = 80..380; 11 groups (10 columns and ERS).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

const char kUsage[] =
    "usage: dml report (--log RUN_DIR | --grid | --ers FILE | --attack SPEC | --robustness |\n"
    "                  --cost-ers) [options]\n"
    "\n"
    "Charts (SVG), retrieval grids and attack pictures (PNG); one mode per call\n"
    "(docs/report.md).\n"
    "\n"
    "dml report --log RUN_DIR [--out FILE.svg]\n"
    "  Training curves from RUN_DIR/log.jsonl (`dml train`): mean_loss (and a defense's\n"
    "  clean_loss / adversarial_loss) and the evaluations' recall@1 and map_at_r10 (%) against\n"
    "  the step.\n"
    "  --out FILE          the SVG (default RUN_DIR/report.svg)\n"
    "\n"
    "dml report --grid --checkpoint FILE --out FILE.png [options]\n"
    "  A retrieval grid: one row per query, the query (blue frame) then its top-K neighbours in\n"
    "  the same images (the query itself excluded), framed green when they share its label and\n"
    "  red otherwise.\n"
    "  --checkpoint FILE   <output_dir>/model.safetensors or checkpoint.safetensors of `dml "
    "train`\n"
    "  --data NAME         dataset (default: the one trained on)\n"
    "  --split SPLIT       train or test (default test)\n"
    "  --root DIR          the dataset's directory (default: the training config's data.root)\n"
    "  --metric N|E|C      distance (default: the training loss metric)\n"
    "  --max-images M      queries and gallery from the first M images (default 0 = all)\n"
    "  --queries N         rows, chosen uniformly among the M images with --seed (default 8)\n"
    "  --k K               neighbours per row (default 5)\n"
    "  --seed S            seed of the query choice (default 0)\n"
    "  --scale F           integer upscaling of every image (default 2 for images up to 64\n"
    "                      pixels wide, 1 otherwise)\n"
    "  --batch-size B      images per forward pass (default 256)\n"
    "  --device DEV        cpu, cuda or cuda:N (default: cuda when a GPU is present)\n"
    "  --out FILE          the PNG (required)\n"
    "\n"
    "dml report --ers A.json [--ers B.json ...] [--names a,b,...] --out FILE.svg\n"
    "  Grouped bars of the ten normalized ERS columns (CA+ CA- QA+ QA- TMA ES:D ES:R LTM GTM\n"
    "  GTT; higher = more robust) and the ERS, one colour per file (`dml ers --out` JSON of a\n"
    "  finished rob28 or rob224 profile). --ers also takes a comma-separated list.\n"
    "  --names LIST        comma-separated legend names, one per file (default: the file stems)\n"
    "  --out FILE          the SVG (required)\n"
    "\n"
    "dml report --attack SPEC --checkpoint FILE --out FILE.png [options]\n"
    "  Attacks the first --queries images of the split as `dml attack --max-images N\n"
    "  --batch-size N` does (same --seed, same gallery: the whole split) and draws one row per\n"
    "  image: the image and its top-K before the attack, the adversarial image and its top-K,\n"
    "  and the perturbation magnified; the header names the attack, eps, model, image count\n"
    "  and mode. SPEC as for `dml attack` (e.g. QA:pm=+:M=1:eps=0.03137:alpha=0.003922:\n"
    "  pgditer=32).\n"
    "  --queries N         images attacked, one row each (default 4, at most 64)\n"
    "  --k K               neighbours per group (default 5, at most 20)\n"
    "  --scale F           as for --grid\n"
    "  --checkpoint --data --split --root --metric --seed --robrank-compat --device\n"
    "                      as for `dml attack`\n"
    "  --out FILE          the PNG (required)\n"
    "\n"
    "dml report --robustness --input LABEL=FILE[,FILE] [--input ...] --out FILE.svg\n"
    "  Several models side by side: the ERS bars and the worst case (from a finished rob28 or\n"
    "  rob224 `dml ers --out` JSON) and the attack-strength curves of every ERS column against\n"
    "  eps and against the number of steps (from a curve28 or curve224 JSON), one colour per\n"
    "  model, with each file's image count and attack mode in the caption.\n"
    "  --input LABEL=FILES one model: its label and its result files, comma-separated (an ERS\n"
    "                      file, a curve file or both); without LABEL= the first file's stem\n"
    "  --out FILE          the SVG (required)\n"
    "\n"
    "dml report --cost-ers --input LABEL=FILE [--input ...] --out FILE.svg\n"
    "  The ERS (%) against the training cost (forward/backward passes per batch), as the HM\n"
    "  paper's Figs. 6-8: one point per row of a `dml aggregate` JSON (mean, error bars of one\n"
    "  sample std over the seeds, the row's name beside it), one line per --input through its\n"
    "  rows in the order of their cost; the ERS profile and image count in the caption.\n"
    "  --input LABEL=FILE  one configuration: its legend label and its aggregate JSON, whose\n"
    "                      rows need the passes/batch and ERS columns; without LABEL= the\n"
    "                      file's stem\n"
    "  --out FILE          the SVG (required)\n";

// ---- --log ---------------------------------------------------------------------------------

int report_log(const std::string& run_dir, const std::string& out_arg) {
  const std::string path = (std::filesystem::path(run_dir) / "log.jsonl").string();
  const std::string out =
      out_arg.empty() ? (std::filesystem::path(run_dir) / "report.svg").string() : out_arg;
  const TrainingLog log = parse_training_log(read_result_file(path), path);
  if (log.cut_line > 0) {
    std::fprintf(stderr,
                 "dml report: warning: %s:%lld: the last line is cut short (a killed run?); "
                 "plotted without it\n",
                 path.c_str(), static_cast<long long>(log.cut_line));
  }
  const int64_t train_records = log.train_records, eval_records = log.eval_records;
  const svg::Series loss{"mean_loss", svg::palette(0), log.mean_loss};
  const svg::Series clean{"clean_loss", svg::palette(2), log.clean_loss};
  const svg::Series adversarial{"adversarial_loss", svg::palette(1), log.adversarial_loss};
  // The evaluations: few points, each circled with its value written.
  const svg::Series recall{"recall@1", svg::palette(0), log.recall_at_1, true};
  const svg::Series map{"map_at_r10", svg::palette(3), log.map_at_r10, true};
  const double max_step = log.max_step;

  const int panels = (train_records > 0) + (eval_records > 0);
  svg::Document doc(960, 40 + 390 * panels);
  doc.text(20, 28,
           "dml train run " + run_dir + " (" + std::to_string(train_records) + " train, " +
               std::to_string(eval_records) + " eval records)",
           16, "start", 0.0, true);
  const svg::Ticks x = svg::nice_ticks(0.0, max_step);
  int panel = 0;
  if (train_records > 0) {
    std::vector<svg::Series> series = {loss};
    if (!clean.points.empty()) series.push_back(clean);
    if (!adversarial.points.empty()) series.push_back(adversarial);
    svg::line_chart(doc, svg::Rect{80, 40.0 + 390 * panel + 40, 680, 300}, x, "training loss",
                    "step", "loss", series);
    ++panel;
  }
  if (eval_records > 0) {
    svg::line_chart(doc, svg::Rect{80, 40.0 + 390 * panel + 40, 680, 300}, x, "evaluation", "step",
                    "%", {recall, map});
  }
  engine::detail::write_file_atomically(out, doc.str());
  std::printf("wrote %s: %lld train and %lld eval records of %s\n", out.c_str(),
              static_cast<long long>(train_records), static_cast<long long>(eval_records),
              path.c_str());
  return 0;
}

// ---- --ers ---------------------------------------------------------------------------------

metrics::ErsRow read_ers_file(const std::string& path, ErsConditions* conditions) {
  const ErsFile file = parse_ers_file(read_result_file(path), path);
  *conditions = file.conditions;
  const double ers = metrics::empirical_robustness_score(file.raw);
  if (file.stored_ers && std::abs(*file.stored_ers - ers) > 1e-6 * std::max(1.0, std::abs(ers))) {
    std::fprintf(stderr, "dml report: warning: %s: \"ers\" %g differs from its columns' %g\n",
                 path.c_str(), *file.stored_ers, ers);
  }
  return file.raw;
}

int report_ers(const std::vector<std::string>& files, const std::vector<std::string>& names,
               const std::string& out) {
  std::vector<std::vector<double>> values;  // [file][column], 10 normalized + ERS
  ErsConditions first;
  for (const std::string& path : files) {
    ErsConditions conditions;
    const metrics::ErsRow raw = read_ers_file(path, &conditions);
    if (path == files.front()) {
      first = conditions;
    } else if (conditions != first) {
      std::fprintf(stderr,
                   "dml report: warning: %s (%s) and %s (%s) were attacked under different "
                   "conditions: their scores do not compare\n",
                   path.c_str(), conditions.str().c_str(), files.front().c_str(),
                   first.str().c_str());
    }
    const metrics::ErsRow normalized = metrics::ers_normalized(raw);
    values.emplace_back(normalized.begin(), normalized.end());
    values.back().push_back(metrics::empirical_robustness_score(raw));
  }
  std::vector<std::string> groups(metrics::ers_column_names().begin(),
                                  metrics::ers_column_names().end());
  groups.push_back("ERS");
  svg::Document doc(960, 440);
  doc.text(20, 28, "Empirical Robustness Score: normalized columns and ERS", 16, "start", 0.0,
           true);
  svg::bar_chart(doc, svg::Rect{80, 80, 680, 300}, "higher = more robust", groups, names, values,
                 "normalized score", 100.0);
  engine::detail::write_file_atomically(out, doc.str());

  std::printf("%-16s", "");
  for (const std::string& g : groups) std::printf("%7s", g.c_str());
  std::printf("\n");
  for (size_t f = 0; f < files.size(); ++f) {
    std::printf("%-16s", names[f].c_str());
    for (double v : values[f]) std::printf("%7.1f", v);
    std::printf("\n");
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) items.push_back(item);
  if (!text.empty() && text.back() == ',') items.push_back("");
  return items;
}

int run_report(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const bool log_mode = args.has("--log"), grid_mode = args.has("--grid"),
             ers_mode = args.has("--ers"), attack_mode = args.has("--attack"),
             robustness_mode = args.has("--robustness"), cost_mode = args.has("--cost-ers");
  if (log_mode + grid_mode + ers_mode + attack_mode + robustness_mode + cost_mode != 1) {
    throw UsageError(
        "give exactly one of --log RUN_DIR, --grid, --ers FILE, --attack SPEC, --robustness or "
        "--cost-ers");
  }
  if (cost_mode) {
    args.take_flag("--cost-ers");
    return run_report_cost_ers(args);
  }
  if (robustness_mode) {
    args.take_flag("--robustness");
    return run_report_robustness(args);
  }
  if (attack_mode) return run_report_attack(args);
  if (grid_mode) {
    args.take_flag("--grid");
    return run_report_grid(args);
  }
  if (log_mode) {
    const std::string run_dir = args.take_string("--log");
    const std::string out = args.take_string("--out", "");
    args.finish();
    if (run_dir.empty()) throw UsageError("--log needs a run directory");
    check_replaceable_file(out, "--out");
    require_input_file((std::filesystem::path(run_dir) / "log.jsonl").string(), "--log");
    return report_log(run_dir, out);
  }
  std::vector<std::string> files;
  for (const std::string& value : args.take_all("--ers")) {
    for (const std::string& file : split_commas(value)) {
      if (file.empty()) throw UsageError("--ers: an empty file name in '" + value + "'");
      files.push_back(file);
    }
  }
  const std::optional<std::string> names_text = args.take_optional("--names");
  const std::string out = args.take_string("--out");
  args.finish();
  check_replaceable_file(out, "--out");
  std::vector<std::string> names;
  if (names_text) {
    names = split_commas(*names_text);
    if (names.size() != files.size()) {
      throw UsageError("--names: " + std::to_string(names.size()) + " names for " +
                       std::to_string(files.size()) + " --ers files");
    }
  } else {
    for (const std::string& file : files) {
      names.push_back(std::filesystem::path(file).stem().string());
    }
  }
  for (const std::string& file : files) require_input_file(file, "--ers");
  return report_ers(files, names, out);
}

}  // namespace dml
