// The run's log in three forms (header: tools/dml/run_log.h).
#include "tools/dml/run_log.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <vector>

#include "engine/io/file_io.h"
#include "kernels/common/check.h"
#include "tools/dml/tensorboard/event_file.h"

namespace dml {

using nlohmann::json;

namespace {

// The keys that place a record (which run stage, which step) rather than measure anything: the
// first columns of log.csv, in this order, and never TensorBoard scalars (the step is its x axis).
const std::vector<std::string> kPlaceKeys = {"type", "step", "epoch", "batch", "batches"};

bool is_place_key(const std::string& key) {
  return std::find(kPlaceKeys.begin(), kPlaceKeys.end(), key) != kPlaceKeys.end();
}

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> records;
  std::string line;
  while (std::getline(in, line)) records.push_back(json::parse(line));
  return records;
}

// On resume: the records of log.jsonl written after the checkpoint (steps > `step`) describe
// work the resumed run redoes and logs again, and a kill can leave a torn last line; both are
// dropped (the file rewritten atomically) so the log reads like one uninterrupted run. Returns how
// many lines were dropped.
int64_t drop_log_records_after(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return 0;  // no log yet
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const json record = json::parse(line, nullptr, false);
    const bool valid = record.is_object();
    const bool after = valid && record.contains("step") && record["step"].is_number_integer() &&
                       record["step"].get<int64_t>() > step;
    if (!valid || after) {
      ++dropped;
      continue;
    }
    kept += line + '\n';
  }
  if (dropped > 0) engine::detail::write_file_atomically(path, kept);
  return dropped;
}

void report_dropped(const std::string& path, int64_t dropped, const char* what, int64_t step) {
  if (dropped == 0) return;
  std::fprintf(stderr, "train: %s: dropped %lld %s after the checkpoint's step %lld\n",
               path.c_str(), static_cast<long long>(dropped), what, static_cast<long long>(step));
}

// A CSV cell (RFC 4180): quoted, with quotes doubled, when it holds a comma, a quote or a line
// break. A number is written as log.jsonl writes it; null (a metric without a value) is empty.
std::string csv_cell(const json& value) {
  if (value.is_null()) return "";
  const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_line(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) line += (i > 0 ? "," : "") + cells[i];
  return line + "\n";
}

std::string csv_row(const std::vector<std::string>& columns, const json& record) {
  std::vector<std::string> cells;
  for (const std::string& column : columns) {
    cells.push_back(record.contains(column) ? csv_cell(record.at(column)) : "");
  }
  return csv_line(cells);
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Our event files, not the temporary files of their atomic rewrite on resume ("<name>.tmp.<pid>",
// engine/io/file_io.h).
bool is_event_file(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  return name.rfind(tensorboard::kEventFilePrefix, 0) == 0 &&
         name.find(".tmp.") == std::string::npos;
}

std::vector<std::filesystem::path> event_files(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file() && is_event_file(entry.path())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string tensorboard_dir(const std::string& output_dir) {
  return (std::filesystem::path(output_dir) / "tensorboard").string();
}

// log.csv. Its header is the union of the keys of the records so far: a record with a key the
// header lacks (the first training record, the first evaluation) has the file rewritten from
// log.jsonl under the wider header; any other is appended as one line.
class RunLog::Csv {
 public:
  Csv(const std::string& path, const std::string& jsonl_path, bool fresh)
      : path_(path), jsonl_path_(jsonl_path) {
    engine::detail::remove_abandoned_temporaries(path_);
    if (fresh) {
      open(std::ios::trunc);
    } else {
      rewrite();  // log.jsonl as the resume left it: no records after the checkpoint
    }
  }

  // `record` is log.jsonl's last line already.
  void write(const json& record) {
    if (add_columns(record)) {
      rewrite();
      return;
    }
    out_ << csv_row(columns_, record);
    out_.flush();
    ENGINE_CHECK(out_.good(), path_, ": write failed");
  }

 private:
  void open(std::ios::openmode mode) {
    out_.close();
    out_.open(path_, std::ios::out | mode);
    ENGINE_CHECK(out_.good(), path_, ": cannot open the log for writing");
  }

  // Adds the keys of `record` that are not columns yet; says whether there were any.
  bool add_columns(const json& record) {
    bool added = false;
    for (const auto& item : record.items()) {
      if (std::find(seen_.begin(), seen_.end(), item.key()) != seen_.end()) continue;
      seen_.push_back(item.key());
      added = true;
    }
    if (!added) return false;
    columns_.clear();
    for (const std::string& key : kPlaceKeys) {
      if (std::find(seen_.begin(), seen_.end(), key) != seen_.end()) columns_.push_back(key);
    }
    for (const std::string& key : seen_) {
      if (!is_place_key(key)) columns_.push_back(key);
    }
    return true;
  }

  void rewrite() {
    const std::vector<json> records = read_jsonl(jsonl_path_);
    for (const json& record : records) add_columns(record);
    std::string text = records.empty() ? "" : csv_line(columns_);
    for (const json& record : records) text += csv_row(columns_, record);
    out_.close();
    engine::detail::write_file_atomically(path_, text);
    open(std::ios::app);
  }

  std::string path_, jsonl_path_;
  std::ofstream out_;
  std::vector<std::string> seen_;     // the keys so far, in order of first appearance
  std::vector<std::string> columns_;  // kPlaceKeys first, then the others of seen_
};

// The event file of this process (tools/dml/tensorboard/event_file.h).
class RunLog::Events {
 public:
  Events(const std::string& dir, std::optional<int64_t> resume_step) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    ENGINE_CHECK(!error, dir, ": cannot create the folder: ", error.message());
    for (const std::filesystem::path& file : event_files(dir)) {
      engine::detail::remove_abandoned_temporaries(file.string());
      if (resume_step) {
        keep_through_step(file.string(), *resume_step);
      } else {
        std::filesystem::remove(file, error);
        ENGINE_CHECK(!error, file.string(), ": cannot remove: ", error.message());
      }
    }
    open_new_file(dir);
  }

  void write(const json& record) {
    std::vector<tensorboard::Scalar> scalars;
    for (const auto& item : record.items()) {
      const json& value = item.value();
      if (is_place_key(item.key()) || !value.is_number()) continue;
      scalars.push_back(
          {record.at("type").get<std::string>() + "/" + item.key(), value.get<double>()});
    }
    if (scalars.empty()) return;
    write_record(
        tensorboard::scalars_event(unix_seconds(), record.at("step").get<int64_t>(), scalars));
  }

 private:
  // A resumed run: the earlier file without its events after the checkpoint and a torn tail.
  static void keep_through_step(const std::string& path, int64_t step) {
    const tensorboard::KeptRecords kept = tensorboard::records_through_step(
        engine::detail::read_whole_file(path, "TensorBoard event file"), step);
    if (kept.dropped == 0) return;
    engine::detail::write_file_atomically(path, kept.bytes);
    report_dropped(path, kept.dropped, "event record(s)", step);
  }

  // events.out.tfevents.<unix seconds>.<host name>, as TensorFlow names them; a numbered suffix
  // when a file of that name exists (a resume within the same second), which sorts after it.
  void open_new_file(const std::string& dir) {
    const double now = unix_seconds();
    const std::string name = tensorboard::kEventFilePrefix +
                             std::to_string(static_cast<int64_t>(now)) + "." + host_name();
    path_ = (std::filesystem::path(dir) / name).string();
    for (int n = 1; std::filesystem::exists(path_); ++n) {
      path_ = (std::filesystem::path(dir) / (name + "." + std::to_string(n))).string();
    }
    out_.open(path_, std::ios::binary);
    ENGINE_CHECK(out_.good(), path_, ": cannot open the event file for writing");
    write_record(tensorboard::file_version_event(now));
  }

  void write_record(const std::string& event) {
    out_ << tensorboard::tfrecord(event);
    out_.flush();
    ENGINE_CHECK(out_.good(), path_, ": write failed");
  }

  std::string path_;
  std::ofstream out_;
};

RunLog::RunLog(const std::string& output_dir, std::optional<int64_t> resume_step)
    : jsonl_path_((std::filesystem::path(output_dir) / "log.jsonl").string()) {
  if (resume_step) {
    report_dropped(jsonl_path_, drop_log_records_after(jsonl_path_, *resume_step), "record(s)",
                   *resume_step);
  }
  // A fresh file for a new run, including --overwrite and a run killed before its first
  // checkpoint; appended to by a resumed run.
  jsonl_.open(jsonl_path_, resume_step ? std::ios::app : std::ios::trunc);
  ENGINE_CHECK(jsonl_.good(), jsonl_path_, ": cannot open the log for writing");
  csv_ = std::make_unique<Csv>((std::filesystem::path(output_dir) / "log.csv").string(),
                               jsonl_path_, !resume_step);
  if (tensorboard::event_files_supported()) {
    events_ = std::make_unique<Events>(tensorboard_dir(output_dir), resume_step);
  } else {
    std::cerr << "note: no TensorBoard files in " << tensorboard_dir(output_dir)
              << ": this dml was built without protobuf (log.jsonl and log.csv hold every "
                 "value)\n";
  }
}

RunLog::~RunLog() = default;

void RunLog::write(const json& record) {
  jsonl_ << record.dump() << '\n';
  jsonl_.flush();
  ENGINE_CHECK(jsonl_.good(), jsonl_path_, ": write failed");
  csv_->write(record);
  if (events_) events_->write(record);
}

}  // namespace dml
