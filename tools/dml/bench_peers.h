// Peer timings for `dml bench --train`: the same training step measured by another framework
// (tools/peers/pytorch_train_step.py), read from its JSON file and matched to our run by config
// file name and device type. Header-only, like bench_table.h, so tests/tools/bench_test.cpp checks
// the parsing and matching without linking the `dml` program.
//
// The file a peer writes (every key required but "precision"; one row per variant it timed):
//   {"peer": "PyTorch", "version": "2.5.1", "device": "cuda", "device_name": "NVIDIA H100 ...",
//    "threads": 16, "precision": "fp32", "overrides": ["defense.pgd.steps=1"],
//    "rows": [{"config": "est.json", "variant": "P0 robrank as-is", "images": 256, "passes": 33,
//              "steps": 10, "warmup": 2, "ms": {"median": 812.0, "min": 801.5, "max": 830.2}}]}
// "device" is "cpu" or "cuda"; "ms" is the wall time of one whole training step (batch copy to
// the device, the defense's PGD steps, the training forward/backward and the optimizer step).
// "precision" is the peer's arithmetic: "fp32" (strict, TF32 off), "pytorch-default" (PyTorch's
// defaults: TF32 convolutions, FP32 matmuls), "tf32" (both TF32) or "bf16" (forward passes under
// BF16 autocast); files without it were written before the key existed, in strict FP32.
// Rows may hold more keys, which are not read: the PyTorch peer's P3 row has "p3" (which
// candidate was faster, each candidate's time and its check against P1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/dml/args.h"
#include "tools/dml/bench_table.h"

namespace dml::bench {

struct PeerRow {
  std::string peer;     // "PyTorch 2.5.1"
  std::string variant;  // "P0 robrank as-is", "P1 best eager", ...
  std::string device;   // "cpu" or "cuda"
  std::string device_name;
  std::string precision = "fp32";  // "fp32", "pytorch-default", "tf32" or "bf16"
  int64_t threads = 0;
  std::vector<std::string> overrides;  // the --set assignments it applied to the config
  std::string config;                  // file name of the config it mirrored, e.g. "est.json"
  int64_t images = 0, passes = 0, steps = 0;
  Stats ms;
};

namespace peer_detail {

inline const nlohmann::json& member(const nlohmann::json& object, const char* key,
                                    const std::string& where) {
  if (!object.is_object() || !object.contains(key)) {
    throw UsageError(where + ": missing key \"" + key + "\"");
  }
  return object.at(key);
}

inline std::string text(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& value = member(object, key, where);
  if (!value.is_string()) throw UsageError(where + ": \"" + key + "\" must be a string");
  return value.get<std::string>();
}

inline double number(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& value = member(object, key, where);
  if (!value.is_number()) throw UsageError(where + ": \"" + key + "\" must be a number");
  return value.get<double>();
}

inline int64_t count(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& value = member(object, key, where);
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    throw UsageError(where + ": \"" + key + "\" must be a non-negative integer");
  }
  return value.get<int64_t>();
}

}  // namespace peer_detail

// Every row of a peer file; `file` names it in errors (UsageError: exit code 2).
inline std::vector<PeerRow> parse_peer_rows(const nlohmann::json& doc, const std::string& file) {
  using namespace peer_detail;
  const std::string name = text(doc, "peer", file);  // (checked in the order of the file format)
  const std::string peer = name + " " + text(doc, "version", file);
  const std::string device = text(doc, "device", file);
  if (device != "cpu" && device != "cuda") {
    throw UsageError(file + ": \"device\" must be \"cpu\" or \"cuda\", not \"" + device + "\"");
  }
  const std::string device_name = text(doc, "device_name", file);
  const int64_t threads = count(doc, "threads", file);
  const std::string precision = doc.contains("precision") ? text(doc, "precision", file) : "fp32";
  if (precision != "fp32" && precision != "pytorch-default" && precision != "tf32" &&
      precision != "bf16") {
    throw UsageError(file + ": \"precision\" must be \"fp32\", \"pytorch-default\", \"tf32\" or " +
                     "\"bf16\", not \"" + precision + "\"");
  }
  const nlohmann::json& overrides = member(doc, "overrides", file);
  if (!overrides.is_array()) throw UsageError(file + ": \"overrides\" must be an array");
  for (const nlohmann::json& o : overrides) {
    if (!o.is_string()) throw UsageError(file + ": \"overrides\" must hold strings");
  }
  const nlohmann::json& rows = member(doc, "rows", file);
  if (!rows.is_array()) throw UsageError(file + ": \"rows\" must be an array");
  std::vector<PeerRow> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where = file + ": rows[" + std::to_string(i) + "]";
    PeerRow r;
    r.peer = peer;
    r.device = device;
    r.device_name = device_name;
    r.threads = threads;
    r.precision = precision;
    r.overrides = overrides.get<std::vector<std::string>>();
    r.variant = text(rows[i], "variant", where);
    r.config = text(rows[i], "config", where);
    r.images = count(rows[i], "images", where);
    r.passes = count(rows[i], "passes", where);
    r.steps = count(rows[i], "steps", where);
    const nlohmann::json& ms = member(rows[i], "ms", where);
    r.ms.median = number(ms, "median", where + ".ms");
    r.ms.min = number(ms, "min", where + ".ms");
    r.ms.max = number(ms, "max", where + ".ms");
    if (!(r.ms.median > 0.0)) throw UsageError(where + ": \"ms.median\" must be > 0");
    out.push_back(r);
  }
  return out;
}

// Every row of a peer file's text (`file` names it in errors): UsageError for text that is not
// JSON, as for a document parse_peer_rows refuses. Like `in >> doc`, what follows the JSON value is
// not read.
inline std::vector<PeerRow> parse_peer_file(const std::string& text, const std::string& file) {
  nlohmann::json doc;
  try {
    std::istringstream in(text);
    in >> doc;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("--peer: '" + file + "' is not valid JSON: " + e.what());
  }
  return parse_peer_rows(doc, file);
}

// The file name of a config path: "configs/fashion/est.json" -> "est.json".
inline std::string config_file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What a peer row must agree with: our run of `dml bench --train`.
struct OurRun {
  std::string config_path;
  std::string device;  // "cpu" or "cuda"
  int64_t images = 0, passes = 0;
  int64_t threads = 0;                 // CPU threads (OpenMP's); not compared on CUDA
  std::vector<std::string> overrides;  // our --set assignments
  std::string precision = "fp32";      // our precision policy: "fp32", "tf32" or "bf16"
};

// A peer row compares with our run when it mirrored the same config file with the same --set
// overrides (in any order) on the same kind of device, timed batches of the same size with the
// same number of passes (a peer that ignored an override such as defense.pgd.steps would otherwise
// be compared with a different workload) and, on the CPU, used as many threads as we did (one
// thread against sixteen is no comparison of implementations), in the same precision as ours, or
// in PyTorch's default one, which is compared with each of ours: it is the PyTorch its users run
// (issue 33 compares our tf32 step with it).
inline bool peer_matches(const PeerRow& r, const OurRun& ours) {
  std::vector<std::string> theirs = r.overrides, mine = ours.overrides;
  std::sort(theirs.begin(), theirs.end());
  std::sort(mine.begin(), mine.end());
  return r.config == config_file_name(ours.config_path) && r.device == ours.device &&
         r.images == ours.images && r.passes == ours.passes && theirs == mine &&
         (ours.device != "cpu" || r.threads == ours.threads) &&
         (r.precision == ours.precision || r.precision == "pytorch-default");
}

}  // namespace dml::bench
