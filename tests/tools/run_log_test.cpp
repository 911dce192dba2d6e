// The three forms of `dml train`'s log (tools/dml/run_log.h): the TensorBoard event file, read back
// with a TFRecord parser and CRC-32C written here (not the writer's), decoded with the generated
// protobuf classes, and log.csv, both checked against log.jsonl record by record; a resumed run
// leaves neither duplicated steps nor a second CSV header.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/tensorboard/event_file.h"
#include "tools/dml/tensorboard/tensorboard_event.pb.h"
#include "tools/dml/trainer.h"

using nlohmann::json;
using tiny_training::tiny_config;

namespace {

// CRC-32C bit by bit (reflected polynomial 0x82F63B78), the definition rather than the writer's
// table.
uint32_t reference_crc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes) {
    crc ^= static_cast<unsigned char>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

uint32_t reference_masked(const std::string& bytes) {
  const uint32_t crc = reference_crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint64_t little_endian(const std::string& bytes, size_t at, size_t count) {
  uint64_t value = 0;
  for (size_t i = 0; i < count; ++i) {
    value |= uint64_t(static_cast<unsigned char>(bytes.at(at + i))) << (8 * i);
  }
  return value;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The Events of a TFRecord file; every record's two CRCs must match.
std::vector<tensorboard::Event> read_events(const std::string& path) {
  const std::string bytes = read_text(path);
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    INFO(path << ", record at byte " << at);
    REQUIRE(bytes.size() - at >= 16);
    const uint64_t length = little_endian(bytes, at, 8);
    CHECK(little_endian(bytes, at + 8, 4) == reference_masked(bytes.substr(at, 8)));
    REQUIRE(length <= bytes.size() - at - 16);
    const std::string data = bytes.substr(at + 12, length);
    CHECK(little_endian(bytes, at + 12 + length, 4) == reference_masked(data));
    tensorboard::Event event;
    REQUIRE(event.ParseFromString(data));
    events.push_back(event);
    at += 16 + length;
  }
  return events;
}

std::vector<std::string> event_files(const std::string& run_dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir + "/tensorboard")) {
    files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The events of a run's files in name order (TensorBoard's), each file opening with its version.
std::vector<tensorboard::Event> run_events(const std::string& run_dir) {
  std::vector<tensorboard::Event> all;
  for (const std::string& file : event_files(run_dir)) {
    INFO(file);
    CHECK(std::filesystem::path(file).filename().string().rfind("events.out.tfevents.", 0) == 0);
    const std::vector<tensorboard::Event> events = read_events(file);
    REQUIRE_FALSE(events.empty());
    CHECK(events[0].file_version() == "brain.Event:2");
    CHECK(events[0].step() == 0);
    CHECK(events[0].wall_time() > 1.7e9);  // seconds since 1970, after 2023
    all.insert(all.end(), events.begin() + 1, events.end());
  }
  return all;
}

std::vector<json> jsonl(const std::string& run_dir) {
  std::ifstream in(run_dir + "/log.jsonl");
  std::vector<json> records;
  std::string line;
  while (std::getline(in, line)) records.push_back(json::parse(line));
  return records;
}

// One event a record, in order: the record's step, and each number of the record other than
// type, step, epoch, batch and batches as the scalar "<type>/<key>" (a float).
void check_events_match_log(const std::string& run_dir) {
  const std::vector<json> records = jsonl(run_dir);
  const std::vector<tensorboard::Event> events = run_events(run_dir);
  REQUIRE(events.size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const json& record = records[i];
    INFO(record.dump());
    CHECK(events[i].step() == record.at("step").get<int64_t>());
    REQUIRE(events[i].has_summary());
    std::vector<std::pair<std::string, float>> expected, got;
    for (const auto& item : record.items()) {
      const std::string& key = item.key();
      if (key == "type" || key == "step" || key == "epoch" || key == "batch" || key == "batches" ||
          !item.value().is_number()) {
        continue;
      }
      expected.emplace_back(record.at("type").get<std::string>() + "/" + key,
                            static_cast<float>(item.value().get<double>()));
    }
    for (const auto& value : events[i].summary().value()) {
      REQUIRE(value.has_simple_value());
      got.emplace_back(value.tag(), value.simple_value());
    }
    CHECK(got == expected);
  }
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

// log.csv: the header (type, step, epoch, batch, batches, then the other keys in the order they
// first appear in log.jsonl) and one row a record, empty where the record has no such key.
void check_csv_matches_log(const std::string& run_dir) {
  const std::vector<json> records = jsonl(run_dir);
  std::vector<std::string> expected_header = {"type", "step", "epoch", "batch", "batches"};
  for (const json& record : records) {
    for (const auto& item : record.items()) {
      if (std::find(expected_header.begin(), expected_header.end(), item.key()) ==
          expected_header.end()) {
        expected_header.push_back(item.key());
      }
    }
  }
  std::ifstream in(run_dir + "/log.csv");
  std::string line;
  REQUIRE(std::getline(in, line));
  const std::vector<std::string> header = split_csv_line(line);
  CHECK(header == expected_header);
  for (const json& record : records) {
    INFO(record.dump());
    REQUIRE(std::getline(in, line));
    const std::vector<std::string> cells = split_csv_line(line);
    REQUIRE(cells.size() == header.size());
    for (size_t c = 0; c < header.size(); ++c) {
      INFO(header[c] << " = '" << cells[c] << "'");
      if (!record.contains(header[c]) || record.at(header[c]).is_null()) {
        CHECK(cells[c].empty());
      } else if (record.at(header[c]).is_string()) {
        CHECK(cells[c] == record.at(header[c]).get<std::string>());
      } else {
        CHECK(json::parse(cells[c]) == record.at(header[c]));
      }
    }
  }
  CHECK_FALSE(std::getline(in, line));  // no more rows than records
}

}  // namespace

TEST_CASE("CRC-32C and its TFRecord mask match the published check value") {
  // "123456789" -> 0xE3069283: the check value of CRC-32C (RFC 3720, the iSCSI polynomial), as
  // are 32 zero bytes -> 0x8A9136AA and 32 bytes 0xFF -> 0x62A8AB43.
  CHECK(dml::tensorboard::crc32c("123456789") == 0xE3069283u);
  CHECK(reference_crc32c("123456789") == 0xE3069283u);
  CHECK(dml::tensorboard::crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(dml::tensorboard::crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  CHECK(dml::tensorboard::crc32c("") == 0u);
  // Masked by hand: 0xE3069283 rotated right by 15 is (0xE3069283 >> 15) | (0x1283 << 17) =
  // 0x0001C60D | 0x25060000 = 0x2507C60D; plus 0xA282EAD8 is 0xC78AB0E5.
  CHECK(dml::tensorboard::masked_crc32c("123456789") == 0xC78AB0E5u);
  CHECK(reference_masked("123456789") == 0xC78AB0E5u);
}

TEST_CASE("dml train writes a TensorBoard event file and log.csv equal to log.jsonl") {
  test::TempDir out;
  const std::string run_dir = out.file("run");
  const dml::TrainConfig config =
      tiny_config("triplet", run_dir, 3, {{"eval", {{"every_epochs", 1}}}, {"epochs", 2}});
  REQUIRE(dml::train(config, dml::TrainOptions()) == 0);

  const std::vector<std::string> files = event_files(run_dir);
  REQUIRE(files.size() == 1);
  // events.out.tfevents.<unix seconds>.<host name>
  const std::string name = std::filesystem::path(files[0]).filename().string();
  const std::string prefix = "events.out.tfevents.";
  REQUIRE(name.rfind(prefix, 0) == 0);
  const size_t dot = name.find('.', prefix.size());
  REQUIRE(dot != std::string::npos);
  CHECK(name.substr(prefix.size(), dot - prefix.size()).find_first_not_of("0123456789") ==
        std::string::npos);
  CHECK(dot + 1 < name.size());

  const std::vector<json> records = jsonl(run_dir);
  REQUIRE(records.size() == 8);  // 3 train + 1 eval records in each of 2 epochs
  check_events_match_log(run_dir);
  check_csv_matches_log(run_dir);
  // The tags people look for.
  bool saw_mean_loss = false, saw_recall = false;
  for (const tensorboard::Event& event : run_events(run_dir)) {
    for (const auto& value : event.summary().value()) {
      saw_mean_loss = saw_mean_loss || value.tag() == "train/mean_loss";
      saw_recall = saw_recall || value.tag() == "eval/recall@1";
    }
  }
  CHECK(saw_mean_loss);
  CHECK(saw_recall);
  std::ifstream csv(run_dir + "/log.csv");
  std::string header;
  std::getline(csv, header);
  CHECK(header.rfind("type,step,epoch,batch,batches,images_per_s,loss,lr,mean_loss,", 0) == 0);
}

TEST_CASE("a resumed dml train continues its logs without duplicated steps or headers") {
  test::TempDir out;
  const std::string run_dir = out.file("run");
  const dml::TrainConfig config =
      tiny_config("triplet", run_dir, 3, {{"eval", {{"every_epochs", 1}}}, {"epochs", 2}});
  dml::TrainOptions stop;
  stop.stop_after_batches = 4;  // in the second epoch, after the first evaluation
  REQUIRE(dml::train(config, stop) == 0);
  const std::vector<std::string> first_files = event_files(run_dir);
  REQUIRE(first_files.size() == 1);
  // What a kill after the checkpoint can leave: a record of a later step, then a torn one.
  tensorboard::Event later;
  later.set_step(999);
  later.mutable_summary()->add_value()->set_tag("train/loss");
  std::string data;
  later.SerializeToString(&data);
  {
    std::ofstream append(first_files[0], std::ios::binary | std::ios::app);
    append << dml::tensorboard::tfrecord(data) << dml::tensorboard::tfrecord(data).substr(0, 20);
  }
  {
    std::ofstream append(run_dir + "/log.jsonl", std::ios::app);
    append << "{\"type\":\"train\",\"step\":999,\"loss\":1}\n{\"type\":\"tr";
  }
  {
    std::ofstream append(run_dir + "/log.csv", std::ios::app);
    append << "train,999,2,9,3,1,1,1,1\ntrain,99";
  }

  dml::TrainOptions resume;
  resume.resume = true;
  REQUIRE(dml::train(config, resume) == 0);

  const std::vector<std::string> files = event_files(run_dir);
  REQUIRE(files.size() == 2);
  CHECK(files[0] == first_files[0]);  // the resumed process's file sorts after the first
  const std::vector<json> records = jsonl(run_dir);
  REQUIRE(records.size() == 8);  // as the uninterrupted run
  int64_t previous_step = 0;
  for (const json& record : records) {
    CHECK(record.at("step").get<int64_t>() >= previous_step);
    previous_step = record.at("step").get<int64_t>();
  }
  check_events_match_log(run_dir);  // the step-999 event and the torn one are gone
  check_csv_matches_log(run_dir);   // one header line, no 999 row, no torn line
}
