// Readers of the JSON files that earlier `dml` runs wrote and later commands read back: a `dml ers
// --out` result (read by `dml ers --resume`, `dml report --ers`, `dml report --robustness` and
// `dml aggregate`), a run's metrics.json (`dml aggregate`), `dml aggregate`'s JSON (`dml report
// --cost-ers`) and a run's log.jsonl (`dml report --log`). The peer files of `dml bench --train`
// have theirs in tools/dml/bench_peers.h.
//
// These files are untrusted input (edited by hand, cut short by a kill, from another binary), so
// each reader takes the file's text, which tests/fuzz/fuzz_result_json.cpp fills with any bytes,
// and either returns plain values or throws engine::Error naming the file (UsageError where its
// command's contract says so: a --resume that does not match). What it returns has been checked,
// so that the commands drawing or printing it read no JSON value of an unexpected type.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/worst_case.h"
#include "metrics/ers.h"
#include "tools/dml/attack_runner.h"

namespace dml {

// ---- any result file -------------------------------------------------------------------------

// The bytes of `path`; engine::Error "<path>: cannot be read" when it cannot be opened.
std::string read_result_file(const std::string& path);

// The JSON object `text` holds; engine::Error "<path>: not a JSON object" for anything else.
nlohmann::json parse_result_object(const std::string& text, const std::string& path);

// ---- dml ers --resume (tools/dml/ers.cpp) ----------------------------------------------------

// The inverse of attack_summary_json (objective_first_batch is not stored, so it stays empty);
// throws engine::Error naming `source` and the key when something is missing or mistyped.
AttackSummary attack_summary_from_json(const nlohmann::json& result, const std::string& source);

// What the run that resumes a `dml ers --out` file would write into it: the file must have been
// written with the same values (the checkpoint's path may differ, its weights may not).
struct ErsResumeKey {
  std::string weights_fnv1a64, profile, metric, dataset, random_streams, precision;
  int64_t batch_size = 0, bn_branch = 0;
  uint64_t seed = 0;
  bool robrank_compat = false;
  int64_t images = 0;               // the images every finished attack must have attacked
  int64_t worst_case_restarts = 0;  // --worst-case R; 0 without it
};

struct ErsResume {
  std::vector<AttackSummary> finished;    // the attacks the interrupted run finished, in order
  std::optional<std::string> checkpoint;  // the checkpoint path it recorded, if any
};

// The interrupted run's file (`text`, read from `path`): UsageError when it was written under
// another key (naming the key and both values) or with another --worst-case; engine::Error when it
// is not a `dml ers` result. With --worst-case (`worst_case` not null) its per-image values are
// added to `worst_case`, a table for `key.images` images.
ErsResume read_ers_resume(const std::string& text, const std::string& path, const ErsResumeKey& key,
                          attacks::WorstCaseTable* worst_case);

// ---- dml report --ers (tools/dml/report.cpp) -------------------------------------------------

// What an ERS file's numbers depend on besides the model: results that differ here are not
// comparable side by side (more images, or robrank's attack definitions, move the scores). Each is
// the value's JSON text, "(none)" when the file lacks it.
struct ErsConditions {
  std::string profile, images, robrank_compat;
  bool operator!=(const ErsConditions& o) const {
    return profile != o.profile || images != o.images || robrank_compat != o.robrank_compat;
  }
  std::string str() const {
    return "profile " + profile + ", " + images + " images, robrank_compat " + robrank_compat;
  }
};

// A finished rob28 / rob224 result: its ten raw columns and the "ers" it stores, if a number.
struct ErsFile {
  metrics::ErsRow raw{};
  ErsConditions conditions;
  std::optional<double> stored_ers;
};
ErsFile parse_ers_file(const std::string& text, const std::string& path);

// ---- dml report --log (tools/dml/report.cpp) -------------------------------------------------

// The curves of a training log, each as (step, value) in the order of the steps: a record of a
// step at or before the last point's replaces the points from there on (a resumed run logs the
// steps after its checkpoint again).
struct TrainingLog {
  std::vector<std::pair<double, double>> mean_loss, clean_loss, adversarial_loss;
  std::vector<std::pair<double, double>> recall_at_1, map_at_r10;  // in %
  int64_t train_records = 0, eval_records = 0;
  double max_step = 0.0;
  int64_t cut_line = 0;  // the number of a last line cut short (a killed run), left out; 0: none
};
// log.jsonl's text: one JSON object a line, blank lines skipped; engine::Error "<path>:<line>: ..."
// for a line that is not an object (but the last one without its newline, which a kill can cut
// short: cut_line) or a train / eval record without a numeric "step", and when there is no train
// or eval record.
TrainingLog parse_training_log(const std::string& text, const std::string& path);

// ---- dml report --cost-ers (tools/dml/report_cost.cpp) ---------------------------------------

// One `dml aggregate` row: its name, seeds and the mean and std of its cost and ERS.
struct CostPoint {
  std::string name;
  size_t seeds = 0;
  double cost = 0.0, ers = 0.0;
  std::optional<double> cost_std, ers_std;
};

struct CostSeries {
  std::string label;
  std::vector<CostPoint> points;        // in the order of their cost
  std::vector<std::string> conditions;  // each row's "ers_conditions" as JSON text
};

// A `dml aggregate` JSON whose rows have the "passes/batch" and "ERS" columns.
CostSeries parse_cost_series(const std::string& label, const std::string& text,
                             const std::string& path);

// ---- dml aggregate (tools/dml/aggregate.cpp) -------------------------------------------------

// A column of the aggregate table: its name (also its key in the JSON) and its digits in the
// Markdown.
struct Column {
  std::string name;
  int digits;
};

// A column read from each seed's metrics.json.
struct MetricColumn {
  Column column;
  std::string key;  // its key in metrics.json; "passes" is divided by "steps"
  double scale;     // 100 for the columns in %
  bool optional;    // absent from metrics.json files written before it was recorded
};
std::vector<MetricColumn> metric_columns();

// One seed folder's results.
struct SeedResult {
  std::vector<std::optional<double>> metrics;  // metric_columns()'s, scaled; none if not recorded
  int64_t kmeans_restarts = 1;  // NMI's k-means++ runs ("kmeans_restarts"; 1 if not recorded)
  bool has_ers = false;
  metrics::ErsRow ers_raw{};
  std::string ers_conditions;  // profile, images, robrank_compat: what makes ERS files comparable
  nlohmann::ordered_json ers_meta;  // the same as JSON, for aggregate.json
};

// A seed's metrics.json (`metrics_text`) and, if it has one, its complete ers.json.
SeedResult parse_seed_result(const std::string& metrics_text, const std::string& metrics_path,
                             const std::optional<std::string>& ers_text,
                             const std::string& ers_path);

// ---- dml report --robustness (tools/dml/report_robustness.cpp) -------------------------------

struct CurvePoint {
  std::string sweep, column;
  double x = 0.0;  // eps (eps sweep) or steps (steps sweep)
  double score = 0.0;
};

// A result's header as the figure's caption describes it: each value as text (a string as
// itself, another value as its JSON, "?" when absent).
struct ResultHeader {
  std::string profile, images, dataset, metric, seed, robrank_compat;
  bool robrank_compat_on = false;                   // "robrank_compat" is true
  bool complete = false;                            // "complete" is true
  std::optional<attacks::AttackSpec> first_attack;  // "attacks"[0]'s spec, if there is one
};

// What one model's files (one --input LABEL=FILE[,FILE]) hold, as the figure draws it.
struct RobustnessModel {
  std::string label, weights;
  std::string ers_path, curve_path;  // empty when not given
  std::optional<metrics::ErsRow> ers_raw;
  ResultHeader ers_header, curve_header;
  // From the ERS file's "worst_case" (has_worst_case), NaN where it has none: the worst-case ERS
  // and the robust fractions (%) of one run and of the worst case; its "restarts" if a number.
  bool has_worst_case = false;
  std::array<double, 3> worst_case{};
  std::optional<std::string> worst_case_restarts;
  std::vector<CurvePoint> curve;
  double steps_eps = 0.0;  // the eps of the curve's first steps-sweep point; 0 when none
};

// Adds a `dml ers --out` result of an ERS profile (rob28, rob224) or a curve profile (curve28,
// curve224), read from `path`, to `model`; a second file of the same kind, or a file of other
// weights than the model's first, is an error.
void add_robustness_file(RobustnessModel& model, const std::string& text, const std::string& path);

}  // namespace dml
