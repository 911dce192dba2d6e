// libFuzzer target: the readers of the JSON files earlier runs wrote (tools/dml/result_json.h and
// the --peer files of tools/dml/bench_peers.h), on the text the commands read from the files. Any
// bytes must be read or fail with engine::Error or dml::UsageError, never another exception or a
// crash; what a reader returns must hold its few promises (docs/testing.md, Fuzzing).
//
// Input: the first byte picks the reader, by its value mod 8 (the seeds use the digit):
//   '0' dml ers --resume            '1' the same with --worst-case 1   '2' dml report --ers
//   '3' dml report --log (log.jsonl) '4' dml report --cost-ers         '5' dml aggregate
//   '6' dml report --robustness      '7' dml bench --train --peer
// and the rest is the file. The two readers of two files take the text before the first '|' as
// the first (aggregate: metrics.json; robustness: one result) and the text after it as the second
// (ers.json; the model's other result), none when there is no '|'. A resumed ERS must match the key
// below (the seeds' values) to get past its checks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "attacks/worst_case.h"
#include "kernels/common/check.h"
#include "tools/dml/args.h"
#include "tools/dml/bench_peers.h"
#include "tools/dml/result_json.h"

namespace {

void resume_ers(const std::string& text, int64_t restarts) {
  dml::ErsResumeKey key;
  key.weights_fnv1a64 = "00000000deadbeef";
  key.profile = "rob28";
  key.metric = "N";
  key.dataset = "fashion-mnist:test";
  key.random_streams = "one per attack";
  key.precision = "fp32";
  key.batch_size = 2;
  key.seed = 0;
  key.images = 2;
  key.worst_case_restarts = restarts;
  attacks::WorstCaseTable table(key.images);
  const dml::ErsResume resume =
      dml::read_ers_resume(text, "ers.json", key, restarts > 0 ? &table : nullptr);
  for (const dml::AttackSummary& s : resume.finished) {
    if (s.images != key.images || s.names.size() != s.clean.size() ||
        s.names.size() != s.adversarial.size()) {
      std::abort();
    }
  }
  for (const attacks::WorstCaseMeasure& m : table.measures()) {
    if (static_cast<int64_t>(m.single.size()) != key.images) std::abort();
  }
}

void read_log(const std::string& text) {
  const dml::TrainingLog log = dml::parse_training_log(text, "log.jsonl");
  // Each curve's steps increase: a record of an earlier step replaced the points after it.
  for (const auto* curve : {&log.mean_loss, &log.clean_loss, &log.adversarial_loss,
                            &log.recall_at_1, &log.map_at_r10}) {
    for (size_t i = 1; i < curve->size(); ++i) {
      if (!((*curve)[i - 1].first < (*curve)[i].first)) std::abort();
    }
  }
  if (log.train_records + log.eval_records <= 0) std::abort();
}

void read_cost(const std::string& text) {
  const dml::CostSeries series = dml::parse_cost_series("fuzz", text, "aggregate.json");
  if (series.points.empty() || series.points.size() != series.conditions.size()) std::abort();
  for (size_t i = 1; i < series.points.size(); ++i) {
    if (series.points[i].cost < series.points[i - 1].cost) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t bar = text.find('|');
  const std::string first = text.substr(0, bar);
  const std::optional<std::string> second =
      bar == std::string::npos ? std::nullopt : std::optional<std::string>(text.substr(bar + 1));
  try {
    switch (data[0] % 8) {
      case 0:
        resume_ers(text, 0);
        break;
      case 1:
        resume_ers(text, 1);
        break;
      case 2:
        dml::parse_ers_file(text, "ers.json");
        break;
      case 3:
        read_log(text);
        break;
      case 4:
        read_cost(text);
        break;
      case 5: {
        const dml::SeedResult seed =
            dml::parse_seed_result(first, "metrics.json", second, "ers.json");
        if (seed.metrics.size() != dml::metric_columns().size()) std::abort();
        break;
      }
      case 6: {
        dml::RobustnessModel model;
        model.label = "fuzz";
        dml::add_robustness_file(model, first, "a.json");
        if (second) dml::add_robustness_file(model, *second, "b.json");
        break;
      }
      default:
        dml::bench::parse_peer_file(text, "peer.json");
        break;
    }
  } catch (const engine::Error&) {
  } catch (const dml::UsageError&) {
  }
  return 0;
}
