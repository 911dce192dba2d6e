#include "tools/dml/args.h"

#include <filesystem>
#include <sstream>

#include "engine/backend.h"
#include "engine/dist/communicator.h"
#include "engine/precision.h"
#include "kernels/common/check.h"

namespace dml {

Args::Args(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) tokens_.push_back({argv[i], false});
}

Args::Args(std::vector<std::string> tokens) {
  for (auto& t : tokens) tokens_.push_back({std::move(t), false});
}

std::optional<size_t> Args::find(const std::string& key) const {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].used) continue;
    const std::string& t = tokens_[i].text;
    if (t == key || t.rfind(key + "=", 0) == 0) return i;
  }
  return std::nullopt;
}

std::string Args::value_at(size_t index, const std::string& key) {
  Token& token = tokens_[index];
  token.used = true;
  if (token.text.size() > key.size()) return token.text.substr(key.size() + 1);  // --key=value
  if (index + 1 >= tokens_.size() || tokens_[index + 1].used) {
    throw UsageError("option " + key + " needs a value");
  }
  const std::string& value = tokens_[index + 1].text;
  // `--out --json` is a forgotten value, not a file named "--json"; a value that really starts
  // with "--" can still be given as --key=--value.
  if (value.size() > 2 && value.rfind("--", 0) == 0) {
    throw UsageError("option " + key + " needs a value, got the option " + value + " (write " +
                     key + "=VALUE for a value starting with --)");
  }
  tokens_[index + 1].used = true;
  return value;
}

bool Args::has(const std::string& key) const { return find(key).has_value(); }

bool Args::take_flag(const std::string& key) {
  std::optional<size_t> i = find(key);
  if (!i) return false;
  if (tokens_[*i].text != key) throw UsageError("flag " + key + " takes no value");
  tokens_[*i].used = true;
  return true;
}

std::optional<std::string> Args::take_optional(const std::string& key) {
  std::optional<size_t> i = find(key);
  if (!i) return std::nullopt;
  return value_at(*i, key);
}

std::string Args::take_string(const std::string& key) {
  std::optional<std::string> v = take_optional(key);
  if (!v) throw UsageError("missing required option " + key);
  return *v;
}

std::string Args::take_string(const std::string& key, const std::string& fallback) {
  return take_optional(key).value_or(fallback);
}

namespace {
int64_t to_int(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw UsageError(what + ": expected an integer, got '" + text + "'");
}

double to_double(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw UsageError(what + ": expected a number, got '" + text + "'");
}
}  // namespace

int64_t Args::take_int(const std::string& key) { return to_int(take_string(key), key); }

int64_t Args::take_int(const std::string& key, int64_t fallback) {
  std::optional<std::string> v = take_optional(key);
  return v ? to_int(*v, key) : fallback;
}

double Args::take_double(const std::string& key, double fallback) {
  std::optional<std::string> v = take_optional(key);
  return v ? to_double(*v, key) : fallback;
}

std::vector<std::string> Args::take_all(const std::string& key) {
  std::vector<std::string> values;
  while (std::optional<std::string> v = take_optional(key)) values.push_back(*v);
  return values;
}

void Args::finish() const {
  for (const Token& t : tokens_) {
    if (!t.used) throw UsageError("unexpected argument '" + t.text + "'");
  }
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) values.push_back(to_int(item, what));
  if (values.empty()) throw UsageError(what + ": expected a comma-separated list of integers");
  return values;
}

const char kBackendUsage[] =
    "options of every subcommand:\n"
    "  --conv ours|cudnn   convolution on CUDA tensors: our implicit-GEMM kernels (default) or\n"
    "                      cuDNN's, for validation (also ENGINE_CONV=...)\n"
    "  --gemm ours|cublas  dense GEMM on CUDA tensors: our tiled SGEMM (default) or cuBLAS's\n"
    "                      (also ENGINE_GEMM=...); CPU tensors ignore both\n"
    "  --precision fp32|tf32|bf16  GEMMs and convolutions: strict FP32 (default), or operands\n"
    "                      rounded to TF32 or BF16 with FP32 accumulation (tensor cores on\n"
    "                      CUDA; the same rounding on CPU f32 tensors); dml train: overrides\n"
    "                      the config key `precision`\n";

void take_backend_options(Args& args) {
  try {
    if (const std::optional<std::string> conv = args.take_optional("--conv")) {
      engine::set_conv_backend(engine::parse_conv_backend(*conv, "--conv"));
    }
    if (const std::optional<std::string> gemm = args.take_optional("--gemm")) {
      engine::set_gemm_backend(engine::parse_gemm_backend(*gemm, "--gemm"));
    }
    if (const std::optional<std::string> precision = args.take_optional("--precision")) {
      engine::set_precision(engine::parse_precision(*precision, "--precision"));
    }
  } catch (const engine::Error& e) {
    throw UsageError(e.what());
  }
}

std::optional<engine::kernels::Metric> take_metric_option(Args& args) {
  const std::optional<std::string> text = args.take_optional("--metric");
  if (!text) return std::nullopt;
  try {
    return engine::kernels::parse_metric(*text);
  } catch (const engine::Error& e) {
    throw UsageError(std::string("--metric: ") + e.what());
  }
}

void require_input_file(const std::string& path, const std::string& what) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) throw UsageError(what + " " + path + ": no such file");
  if (std::filesystem::is_directory(status)) {
    throw UsageError(what + " " + path + ": a folder, not a file");
  }
}

void refuse_output_over_input(const std::string& output, const std::string& output_option,
                              const std::string& input, const std::string& input_option) {
  if (output.empty() || input.empty()) return;
  std::error_code error;  // a file that does not exist yet is no input
  if (std::filesystem::equivalent(output, input, error)) {
    throw UsageError(output_option + " " + output + " is the " + input_option +
                     " file: writing it would destroy the input");
  }
}

engine::Device parse_device_option(const std::optional<std::string>& text,
                                   const std::string& what) {
  if (!text || *text == "auto") return engine::default_device();
  engine::Device device;
  try {
    device = engine::parse_device(*text);
  } catch (const engine::Error& e) {
    throw UsageError(what + ": " + e.what());
  }
  if (device.is_cuda() && device.index >= engine::cuda_device_count()) {
    engine::fail(what, " ", device.str(), ": no such CUDA device (", engine::cuda_device_count(),
                 " visible: no GPU, no driver, or a build without CUDA); use cpu");
  }
  if (device.is_cuda() && device.index != 0) {
    throw UsageError(what + ": " + device.str() +
                     ": dml runs on one GPU, cuda:0 (pick it with CUDA_VISIBLE_DEVICES)");
  }
  // One of several ranks: cuda:0 becomes this rank's own GPU, its local rank among the visible
  // ones, before the first CUDA tensor (docs/distributed.md, "One process per device").
  const engine::dist::World& w = engine::dist::world();
  if (device.is_cuda() && w.size > 1) {
    engine::use_cuda_device(engine::dist::rank_cuda_device(w, engine::cuda_device_count()));
  }
  return device;
}

}  // namespace dml
