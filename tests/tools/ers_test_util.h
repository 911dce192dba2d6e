// What the `dml ers` tests share (ers_resume_test, ers_curve_test, ers_worst_case_test): JSON files
// in and out, and `dml ers` on the tiny model's data of tiny_training.h, on the CPU.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/commands.h"

namespace ers_test {

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline void write_json(const std::string& path, const nlohmann::json& value) {
  std::ofstream out(path);
  out << value.dump(2);
}

// `dml ers --profile PROFILE` over the first `images` test images in one batch, written to `out`,
// with `extra` options appended.
inline int run_tiny_ers(const std::string& checkpoint, const std::string& profile, int images,
                        const std::string& out, const std::vector<std::string>& extra) {
  std::vector<std::string> tokens = {"--checkpoint", checkpoint,
                                     "--profile",    profile,
                                     "--max-images", std::to_string(images),
                                     "--batch-size", std::to_string(images),
                                     "--device",     "cpu",
                                     "--out",        out,
                                     "--root",       tiny_training::data_root()};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  dml::Args args(tokens);
  return dml::run_ers(args);
}

}  // namespace ers_test
