// A test helper that writes a small .npy file with the engine's own writer (engine/io/npy.h), for
// the command-level tests in tests/CMakeLists.txt that feed `dml metrics` / `dml hardness` arrays
// worked by hand:
//
//   write_npy OUT DTYPE ROWS COLS V...
//
// DTYPE f4 (stored <f4) or i8 (stored <i8); COLS 0 for a 1-D array of ROWS values, else a
// [ROWS, COLS] array of ROWS * COLS values in row-major order. A bad argument: a message and exit
// status 2; a file that cannot be written: the engine's message and exit status 1.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "engine/io/npy.h"
#include "engine/tensor.h"

namespace {

constexpr char kUsage[] =
    "usage: write_npy OUT DTYPE ROWS COLS V... (DTYPE f4 or i8; COLS 0 for 1-D)";

struct UsageError {
  std::string message;
};

int64_t parse_int(const char* text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE) {
    throw UsageError{what + " '" + text + "' is not an integer"};
  }
  return value;
}

double parse_double(const char* text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  // ERANGE on underflow still gives the nearest value (as Python's float() does); overflow is bad.
  if (end == text || *end != '\0' || (errno == ERANGE && std::abs(value) == HUGE_VAL)) {
    throw UsageError{what + " '" + text + "' is not a number in range"};
  }
  return value;
}

void write(int argc, char** argv) {
  if (argc < 5) throw UsageError{"expected OUT DTYPE ROWS COLS V..."};
  const std::string out = argv[1];
  const std::string dtype = argv[2];
  if (out.empty()) throw UsageError{"OUT is empty"};
  if (dtype != "f4" && dtype != "i8") throw UsageError{"DTYPE '" + dtype + "' is not f4 or i8"};
  const int64_t rows = parse_int(argv[3], "ROWS");
  const int64_t cols = parse_int(argv[4], "COLS");
  if (rows < 0) throw UsageError{"ROWS is negative"};
  if (cols < 0) throw UsageError{"COLS is negative"};
  const int64_t given = argc - 5;
  // The division keeps ROWS * COLS from overflowing.
  if ((cols == 0 && rows != given) || (cols > 0 && (given % cols != 0 || given / cols != rows))) {
    throw UsageError{std::to_string(given) + " values for ROWS " + std::to_string(rows) +
                     " and COLS " + std::to_string(cols)};
  }
  const engine::Shape shape = cols == 0 ? engine::Shape{rows} : engine::Shape{rows, cols};
  engine::Tensor tensor;
  if (dtype == "f4") {
    std::vector<double> values;
    for (int i = 5; i < argc; ++i) {
      values.push_back(parse_double(argv[i], "value"));
      if (std::isfinite(values.back()) && !std::isfinite(static_cast<float>(values.back()))) {
        throw UsageError{std::string("value '") + argv[i] + "' is out of float32 range"};
      }
    }
    tensor = engine::Tensor::from_vector(values, shape, engine::DType::F32);
  } else {
    std::vector<int64_t> values;
    for (int i = 5; i < argc; ++i) values.push_back(parse_int(argv[i], "value"));
    tensor = engine::Tensor::from_indices(values, shape);
  }
  engine::save_npy(out, tensor);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    write(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "write_npy: %s\n%s\n", error.message.c_str(), kUsage);
    return 2;
  } catch (const std::exception& error) {  // engine::Error: the file could not be written
    std::fprintf(stderr, "write_npy: %s\n", error.what());
    return 1;
  }
  return 0;
}
