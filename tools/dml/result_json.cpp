// Readers of the JSON result files of earlier runs (header: tools/dml/result_json.h).
#include "tools/dml/result_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attacks/attack.h"
#include "attacks/curve_profiles.h"
#include "attacks/profiles.h"
#include "engine/io/file_io.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/json_file.h"

namespace dml {

using nlohmann::json;

namespace {

// True when `j` is an object whose `key` is the boolean true. nlohmann's j.value(key, false)
// throws for a value of another type, and for `j` not an object.
bool is_true(const json& j, const char* key) {
  if (!j.is_object()) return false;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// The JSON text of `key`'s value, "(none)" when `j` has no such key.
std::string dumped_or_none(const json& j, const char* key) {
  return j.is_object() && j.contains(key) ? j.at(key).dump() : "(none)";
}

}  // namespace

// ---- any result file -------------------------------------------------------------------------

std::string read_result_file(const std::string& path) {
  return engine::detail::read_whole_file(path, "result file");
}

json parse_result_object(const std::string& text, const std::string& path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  ENGINE_CHECK(!j.is_discarded() && j.is_object(), path, ": not a JSON object");
  return j;
}

// ---- dml ers --resume ------------------------------------------------------------------------

AttackSummary attack_summary_from_json(const json& result, const std::string& source) {
  auto count = [&](const char* key) {
    const std::optional<int64_t> value = integer_of(result.at(key));
    if (!value) {
      engine::fail(source, ": not an attack result of dml ers/attack: \"", key,
                   "\" is not an integer: ", result.at(key).dump());
    }
    return *value;
  };
  try {
    AttackSummary s;
    s.spec = result.at("attack").get<std::string>();
    s.label = attacks::attack_label(attacks::parse_attack_spec(s.spec));
    s.images = count("images");
    s.seconds = result.at("seconds").get<double>();
    for (const auto& item : result.at("measures").items()) {
      s.names.push_back(item.key());
      s.clean.push_back(item.value().at("clean").get<double>());
      s.adversarial.push_back(item.value().at("adversarial").get<double>());
    }
    s.perturbation.max_delta = result.at("max_delta").get<double>();
    s.perturbation.nan_count = count("nan_count");
    s.perturbation.min_pixel = result.at("pixel_min").get<double>();
    s.perturbation.max_pixel = result.at("pixel_max").get<double>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    engine::fail(source, ": not an attack result of dml ers/attack: ", e.what());
  }
}

namespace {

// The "restarts" of the file's "worst_case" (null when it has none).
json worst_case_restarts(const json& previous) {
  const json& worst_case = previous.at("worst_case");
  return worst_case.is_object() && worst_case.contains("restarts") ? worst_case.at("restarts")
                                                                   : json();
}

// A file written with --worst-case R keeps per-image values that a run without it would drop,
// and one written without it has none to continue from; R must match.
void check_worst_case_resume(const std::string& path, const json& previous, int64_t restarts) {
  const bool has = previous.contains("worst_case");
  const bool any_attack = previous.contains("attacks") && !previous.at("attacks").empty();
  if (has && restarts <= 0) {
    throw UsageError("--resume: " + path +
                     " was written with --worst-case; resume it with --worst-case " +
                     worst_case_restarts(previous).dump());
  }
  if (!has && restarts > 0 && any_attack) {
    throw UsageError("--resume: " + path +
                     " was written without --worst-case: its attacks kept no per-image values");
  }
  if (has && worst_case_restarts(previous) != json(restarts)) {
    throw UsageError("--resume: " + path + " was written with --worst-case " +
                     worst_case_restarts(previous).dump() + ", this run has --worst-case " +
                     std::to_string(restarts));
  }
}

// JSON null (NaN written by nlohmann) back to NaN.
std::vector<double> values_from_json(const json& array) {
  std::vector<double> values;
  for (const json& v : array) {
    values.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
  }
  return values;
}

// The per-image values of the attacks and restarts the file's "worst_case" holds, into `table`.
void restore_worst_case(const std::string& path, const json& previous,
                        attacks::WorstCaseTable& table) {
  if (!previous.contains("worst_case")) return;
  try {
    for (const json& attack : previous.at("worst_case").at("attacks")) {
      const std::string spec = attack.at("attack").get<std::string>();
      const std::string label = attacks::attack_label(attacks::parse_attack_spec(spec));
      const std::optional<int64_t> done = integer_of(attack.at("restarts_done"));
      ENGINE_CHECK(done.has_value(), path, ": worst_case ", spec, ": \"restarts_done\" ",
                   attack.at("restarts_done").dump(), " is not an integer");
      for (const auto& item : attack.at("measures").items()) {
        const std::vector<double> single = values_from_json(item.value().at("single"));
        const std::vector<double> restarts = values_from_json(item.value().at("restarts"));
        ENGINE_CHECK(static_cast<int64_t>(single.size()) == table.images() &&
                         single.size() == restarts.size(),
                     path, ": worst_case ", spec, " ", item.key(), " has ", single.size(),
                     " images, this run attacks ", table.images());
        table.add(spec, label, 0, 0, {{item.key(), single}});
        if (*done > 0) table.add(spec, label, 1, 0, {{item.key(), restarts}});
      }
      table.finish_restart(spec, *done);
    }
  } catch (const nlohmann::json::exception& e) {
    engine::fail(path, ": not a worst-case result of dml ers: ", e.what());
  }
}

}  // namespace

ErsResume read_ers_resume(const std::string& text, const std::string& path, const ErsResumeKey& key,
                          attacks::WorstCaseTable* worst_case) {
  const json previous = parse_result_object(text, path);
  check_worst_case_resume(path, previous, key.worst_case_restarts);
  if (worst_case != nullptr) restore_worst_case(path, previous, *worst_case);

  ENGINE_CHECK(previous.contains("attacks"), path, ": not a dml ers result (no \"attacks\")");
  auto expect = [&](const char* name, const json& value) {
    if (!previous.contains(name) || previous.at(name) != value) {
      throw UsageError("--resume: " + path + " was written with " + name + " " +
                       dumped_or_none(previous, name) + ", this run has " + value.dump());
    }
  };
  expect("weights_fnv1a64", key.weights_fnv1a64);
  expect("profile", key.profile);
  expect("metric", key.metric);
  expect("batch_size", key.batch_size);  // the selection draws go batch by batch
  expect("dataset", key.dataset);
  expect("robrank_compat", key.robrank_compat);
  expect("seed", key.seed);
  expect("random_streams", key.random_streams);
  // Files from before these keys were recorded ran in fp32 through branch 0 (the only choices
  // then).
  auto expect_or = [&](const char* name, const json& value, const json& old) {
    if (previous.contains(name)) {
      expect(name, value);
    } else if (value != old) {
      throw UsageError("--resume: " + path + " was written with " + name + " " + old.dump() +
                       " (a file from before " + name + " was recorded), this run has " +
                       value.dump());
    }
  };
  expect_or("precision", key.precision, "fp32");
  expect_or("bn_branch", key.bn_branch, 0);
  ErsResume resume;
  const auto checkpoint = previous.find("checkpoint");
  if (checkpoint != previous.end() && checkpoint->is_string()) {
    resume.checkpoint = checkpoint->get<std::string>();
  }
  for (const json& attack : previous.at("attacks")) {
    resume.finished.push_back(attack_summary_from_json(attack, path));
    const int64_t images = resume.finished.back().images;
    if (images != key.images) {
      throw UsageError("--resume: " + path + " attacked " + std::to_string(images) +
                       " images, this run attacks " + std::to_string(key.images));
    }
  }
  return resume;
}

// ---- dml report --ers ------------------------------------------------------------------------

ErsFile parse_ers_file(const std::string& text, const std::string& path) {
  const json j = parse_result_object(text, path);
  ErsFile file;
  file.conditions = {dumped_or_none(j, "profile"), dumped_or_none(j, "images"),
                     dumped_or_none(j, "robrank_compat")};
  for (int c = 0; c < metrics::kErsColumns; ++c) {
    const std::string& key = metrics::ers_column_names()[static_cast<size_t>(c)];
    const auto it = j.find(key);
    ENGINE_CHECK(it != j.end() && it->is_number(), path, ": no number \"", key,
                 "\" (give the `dml ers --out` JSON of a finished rob28 or rob224 profile)");
    file.raw[static_cast<size_t>(c)] = it->get<double>();
  }
  const auto stored = j.find("ers");
  if (stored != j.end() && stored->is_number()) file.stored_ers = stored->get<double>();
  return file;
}

// ---- dml report --log ------------------------------------------------------------------------

namespace {

// Appends (step, value); a resumed run that logs a step again replaces what followed it.
void add_point(std::vector<std::pair<double, double>>& points, double step, double value) {
  while (!points.empty() && points.back().first >= step) points.pop_back();
  points.emplace_back(step, value);
}

// The number under `key`, if the record has one (null, e.g. a NaN loss, counts as absent).
bool number_at(const json& record, const char* key, double& value) {
  auto it = record.find(key);
  if (it == record.end() || !it->is_number()) return false;
  value = it->get<double>();
  return true;
}

}  // namespace

TrainingLog parse_training_log(const std::string& text, const std::string& path) {
  TrainingLog log;
  int64_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t newline = text.find('\n', start);
    const bool last_cut = newline == std::string::npos;  // no newline after it
    const std::string line = text.substr(start, last_cut ? std::string::npos : newline - start);
    start = last_cut ? text.size() : newline + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json record = json::parse(line, nullptr, false);
    // The last line without its newline is a record a kill cut short (the trainer drops it on
    // --resume too): the run up to there. A bad line anywhere else is an error.
    if (record.is_discarded() && last_cut) {
      log.cut_line = line_number;
      break;
    }
    ENGINE_CHECK(!record.is_discarded() && record.is_object(), path, ":", line_number,
                 ": not a JSON object");
    const auto type = record.find("type");
    if (type == record.end() || (*type != "train" && *type != "eval")) continue;
    double step = 0.0, value = 0.0;
    ENGINE_CHECK(number_at(record, "step", step), path, ":", line_number, ": a ",
                 type->get<std::string>(), " record without a numeric \"step\"");
    if (*type == "train") {
      ++log.train_records;
      if (number_at(record, "mean_loss", value)) add_point(log.mean_loss, step, value);
      if (number_at(record, "clean_loss", value)) add_point(log.clean_loss, step, value);
      if (number_at(record, "adversarial_loss", value)) {
        add_point(log.adversarial_loss, step, value);
      }
    } else {
      ++log.eval_records;
      if (number_at(record, "recall@1", value)) add_point(log.recall_at_1, step, 100.0 * value);
      if (number_at(record, "map_at_r10", value)) add_point(log.map_at_r10, step, 100.0 * value);
    }
    log.max_step = std::max(log.max_step, step);
  }
  ENGINE_CHECK(log.train_records + log.eval_records > 0, path, ":", line_number,
               ": no train or eval records");
  return log;
}

// ---- dml report --cost-ers -------------------------------------------------------------------

namespace {

std::optional<double> std_of(const json& column) {
  const auto it = column.find("std");
  if (it == column.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

CostSeries parse_cost_series(const std::string& label, const std::string& text,
                             const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  ENGINE_CHECK(!j.is_discarded() && j.is_object() && j.contains("rows") && j.at("rows").is_array(),
               path, ": not a `dml aggregate` JSON (no \"rows\" array)");
  CostSeries series{label, {}, {}};
  for (const json& row : j.at("rows")) {
    ENGINE_CHECK(row.is_object(), path, ": a row that is not an object: ", row.dump());
    const auto name_it = row.find("name");
    ENGINE_CHECK(name_it == row.end() || name_it->is_string(), path, ": a row whose \"name\" ",
                 name_it->dump(), " is not a string");
    const std::string name = name_it == row.end() ? "?" : name_it->get<std::string>();
    const json columns = row.value("columns", json::object());
    for (const char* key : {"passes/batch", "ERS"}) {
      ENGINE_CHECK(columns.contains(key) && columns.at(key).contains("mean") &&
                       columns.at(key).at("mean").is_number(),
                   path, ": row ", name, " has no \"", key, "\" column",
                   std::string(key) == "ERS" ? " (its seeds have no ers.json)"
                                             : " (its metrics.json files record no passes)");
    }
    CostPoint p;
    p.name = name;
    if (row.contains("seeds")) {
      const std::optional<int64_t> seeds = integer_of(row.at("seeds"));
      ENGINE_CHECK(seeds && *seeds >= 0, path, ": row ", name, ": \"seeds\" ",
                   row.at("seeds").dump(), " is not a count");
      p.seeds = static_cast<size_t>(*seeds);
    }
    p.cost = columns.at("passes/batch").at("mean").get<double>();
    p.cost_std = std_of(columns.at("passes/batch"));
    p.ers = columns.at("ERS").at("mean").get<double>();
    p.ers_std = std_of(columns.at("ERS"));
    series.points.push_back(p);
    series.conditions.push_back(row.contains("ers_conditions") ? row.at("ers_conditions").dump()
                                                               : "(not recorded)");
  }
  ENGINE_CHECK(!series.points.empty(), path, ": no rows");
  std::stable_sort(series.points.begin(), series.points.end(),
                   [](const CostPoint& a, const CostPoint& b) { return a.cost < b.cost; });
  return series;
}

// ---- dml aggregate ---------------------------------------------------------------------------

namespace {

const char kCostKey[] = "passes";

double number_at(const json& j, const std::string& key, const std::string& path) {
  const auto it = j.find(key);
  ENGINE_CHECK(it != j.end() && it->is_number(), path, ": no number \"", key, "\"");
  return it->get<double>();
}

}  // namespace

std::vector<MetricColumn> metric_columns() {
  return {{{"R@1", 1}, "recall@1", 100.0, false},   {{"mAP", 1}, "map", 100.0, false},
          {{"mAP@R", 1}, "map_at_r", 100.0, true},  {{"NMI", 1}, "nmi", 100.0, false},
          {{"pi_ratio", 3}, "pi_ratio", 1.0, true}, {{"passes/batch", 2}, kCostKey, 1.0, true}};
}

SeedResult parse_seed_result(const std::string& metrics_text, const std::string& metrics_path,
                             const std::optional<std::string>& ers_text,
                             const std::string& ers_path) {
  SeedResult seed;
  const json m = parse_result_object(metrics_text, metrics_path);
  for (const MetricColumn& c : metric_columns()) {
    const auto it = m.find(c.key);
    if (c.optional && (it == m.end() || it->is_null())) {  // pi_ratio is null when undefined
      seed.metrics.push_back(std::nullopt);
      continue;
    }
    double value = number_at(m, c.key, metrics_path);
    if (c.key == kCostKey) {
      const double steps = number_at(m, "steps", metrics_path);
      ENGINE_CHECK(steps > 0, metrics_path, ": \"steps\" is ", steps,
                   ": no training step to divide the passes by");
      value /= steps;
    }
    seed.metrics.push_back(c.scale * value);
  }
  // Written since NMI could come from several k-means runs; a file without it made one.
  const auto restarts = m.find("kmeans_restarts");
  if (restarts != m.end() && !restarts->is_null()) {
    seed.kmeans_restarts = integer_at(m, "kmeans_restarts", metrics_path);
    ENGINE_CHECK(seed.kmeans_restarts >= 1, metrics_path, ": \"kmeans_restarts\" is ",
                 seed.kmeans_restarts, ", not a count of k-means runs");
  }
  if (!ers_text) return seed;
  const json e = parse_result_object(*ers_text, ers_path);
  ENGINE_CHECK(is_true(e, "complete"), ers_path,
               ": the ERS is not complete (\"complete\" is not true): run tools/seeds.sh or "
               "tools/repro.sh again to finish it");
  seed.has_ers = true;
  for (int c = 0; c < metrics::kErsColumns; ++c) {
    seed.ers_raw[static_cast<size_t>(c)] =
        number_at(e, metrics::ers_column_names()[static_cast<size_t>(c)], ers_path);
  }
  for (const char* key : {"profile", "images", "robrank_compat"}) {
    seed.ers_meta[key] = e.contains(key) ? e.at(key) : json(nullptr);
  }
  seed.ers_conditions = ErsConditions{dumped_or_none(e, "profile"), dumped_or_none(e, "images"),
                                      dumped_or_none(e, "robrank_compat")}
                            .str();
  return seed;
}

// ---- dml report --robustness -----------------------------------------------------------------

namespace {

std::string text_of(const json& j, const char* key) {
  if (!j.contains(key)) return "?";
  return j.at(key).is_string() ? j.at(key).get<std::string>() : j.at(key).dump();
}

ResultHeader header_of(const json& j, const std::string& path) {
  ResultHeader h;
  h.profile = text_of(j, "profile");
  h.images = text_of(j, "images");
  h.dataset = text_of(j, "dataset");
  h.metric = text_of(j, "metric");
  h.seed = text_of(j, "seed");
  h.robrank_compat = text_of(j, "robrank_compat");
  h.robrank_compat_on = is_true(j, "robrank_compat");
  h.complete = is_true(j, "complete");
  if (j.contains("attacks") && j.at("attacks").is_array() && !j.at("attacks").empty() &&
      j.at("attacks")[0].contains("attack")) {
    const json& first = j.at("attacks")[0].at("attack");
    ENGINE_CHECK(first.is_string(), path, ": the first attack's \"attack\" ", first.dump(),
                 " is not an attack spec");
    h.first_attack = attacks::parse_attack_spec(first.get<std::string>());
  }
  return h;
}

// The three worst-case numbers drawn per model, NaN where absent.
std::array<double, 3> worst_case_values(const json& worst_case) {
  auto number = [](const json& j, const char* key, double scale) {
    return j.is_object() && j.contains(key) && j.at(key).is_number()
               ? scale * j.at(key).get<double>()
               : std::nan("");
  };
  const json none;
  const json& fractions = worst_case.is_object() && worst_case.contains("robust_fraction")
                              ? worst_case.at("robust_fraction")
                              : none;
  return {number(worst_case, "ers_worst", 1.0), number(fractions, "single", 100.0),
          number(fractions, "worst", 100.0)};
}

void read_ers(RobustnessModel& model, const std::string& path, const json& j) {
  ENGINE_CHECK(model.ers_path.empty(), path, ": a second ERS result for '", model.label, "' (",
               model.ers_path, " is the first)");
  metrics::ErsRow raw{};
  for (size_t c = 0; c < raw.size(); ++c) {
    const std::string& key = metrics::ers_column_names()[c];
    ENGINE_CHECK(j.contains(key) && j.at(key).is_number(), path, ": no number \"", key,
                 "\" (an unfinished rob28/rob224 run? finish it with `dml ers --resume`)");
    raw[c] = j.at(key).get<double>();
  }
  model.ers_header = header_of(j, path);
  model.ers_path = path;
  model.ers_raw = raw;
  const json worst_case = j.contains("worst_case") ? j.at("worst_case") : json();
  model.has_worst_case = !worst_case.is_null();
  model.worst_case = worst_case_values(worst_case);
  if (worst_case.is_object() && worst_case.contains("restarts") &&
      worst_case.at("restarts").is_number()) {
    model.worst_case_restarts = worst_case.at("restarts").dump();
  }
}

void read_curve(RobustnessModel& model, const std::string& path, const json& j) {
  ENGINE_CHECK(model.curve_path.empty(), path, ": a second curve result for '", model.label, "' (",
               model.curve_path, " is the first)");
  ENGINE_CHECK(j.contains("curve") && j.at("curve").is_array(), path,
               ": no \"curve\" array (written by a binary without curve28/curve224?)");
  double steps_eps = 0.0;
  bool steps_seen = false;
  for (const json& p : j.at("curve")) {
    CurvePoint point;
    try {
      point.sweep = p.at("sweep").get<std::string>();
      point.column = p.at("column").get<std::string>();
      point.x = point.sweep == "eps" ? p.at("eps").get<double>() : p.at("steps").get<double>();
      point.score = p.at("score").get<double>();
    } catch (const nlohmann::json::exception& e) {
      engine::fail(path,
                   ": a \"curve\" point without sweep, column, eps, steps or score: ", p.dump());
    }
    // The steps sweep's budget, for the figure's heading: the first steps point's eps.
    if (point.sweep == "steps" && !steps_seen) {
      steps_seen = true;
      if (p.contains("eps") && p.at("eps").is_number()) steps_eps = p.at("eps").get<double>();
    }
    model.curve.push_back(point);
  }
  model.curve_header = header_of(j, path);
  model.curve_path = path;
  model.steps_eps = steps_eps;
}

}  // namespace

void add_robustness_file(RobustnessModel& model, const std::string& text, const std::string& path) {
  const json j = parse_result_object(text, path);
  ENGINE_CHECK(j.contains("profile") && j.at("profile").is_string(), path,
               ": no \"profile\" (give `dml ers --out` results)");
  const std::string profile = j.at("profile").get<std::string>();
  const std::string weights = text_of(j, "weights_fnv1a64");
  if (!model.weights.empty()) {
    ENGINE_CHECK(weights == model.weights, path, ": weights_fnv1a64 ", weights,
                 " differs from the other file of '", model.label, "' (", model.weights,
                 "): two models under one label");
  }
  model.weights = weights;
  if (attacks::is_ers_profile(profile)) {
    read_ers(model, path, j);
  } else if (attacks::is_curve_profile(profile)) {
    read_curve(model, path, j);
  } else {
    engine::fail(path, ": profile '", profile,
                 "' is neither an ERS (rob28, rob224) nor a curve (curve28, curve224) result");
  }
}

}  // namespace dml
