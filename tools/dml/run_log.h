// The log of a `dml train` run, written three ways from the same records so they cannot disagree
// (docs/report.md, "The run folder"):
//   log.jsonl    one JSON object a line: a "train" record per progress line, an "eval" record per
//                evaluation (training_run.cpp builds them);
//   log.csv      the same records as a table: a header line of the union of their keys (type,
//                step, epoch, batch, batches first, then the others in the order they first
//                appear in log.jsonl), one row a record, an empty cell where a record lacks the
//                key or its value is null;
//   tensorboard/ TensorBoard event files: each numeric value of a record as the scalar
//                "<type>/<key>" (train/mean_loss, eval/recall@1) at the record's step.
// All three are flushed as each record is written, so a kill loses at most the last record.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dml {

// The event files' folder in output_dir. A folder of their own: every process of a resumed run
// writes a new event file (TensorBoard reads a folder's event files in name order, as one run),
// and these files stay together apart from the run's other outputs.
std::string tensorboard_dir(const std::string& output_dir);

class RunLog {
 public:
  // A fresh run (`resume_step` empty, --overwrite included): empty log.jsonl and log.csv, and the
  // event files of the run it replaces removed. A run resumed from a checkpoint at step S: the
  // records of log.jsonl and of the earlier event files after step S (work the resumed run redoes
  // and logs again) and a torn last record are dropped, log.csv is rebuilt from log.jsonl, and
  // this process writes a new event file, so all three read like one uninterrupted run.
  RunLog(const std::string& output_dir, std::optional<int64_t> resume_step);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // One record (a JSON object with "type" and "step"), to all three.
  void write(const nlohmann::json& record);

 private:
  class Csv;
  class Events;
  std::string jsonl_path_;
  std::ofstream jsonl_;
  std::unique_ptr<Csv> csv_;
  std::unique_ptr<Events> events_;
};

}  // namespace dml
