// The parts of `dml bench` that need no GPU, header-only so tests/tools/bench_test.cpp can check
// them without linking the `dml` program: the workload tables (ResNet-18's 20 convolutions and its
// parameter shapes), the FLOP and byte counts, the statistics over repeated timings, buffer
// rotation against L2, the options' validation, and the table / JSON formatting of result rows.
//
// Units: times in milliseconds; FLOP rates in TFLOP/s (1e12 FLOP/s); bandwidth in GB/s (1e9 B/s).
// Every byte count below is the compulsory traffic (each input read once, each output written
// once, f32), the floor an implementation could reach; bench.cpp compares achieved rates against
// ceilings measured in the same run (a device-to-device copy, cuBLAS SGEMM).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/conv2d/conv2d.h"
#include "tools/dml/args.h"
#include "tools/dml/bench_modes.h"

namespace dml::bench {

// ---- workloads ---------------------------------------------------------------------------------

struct ConvLayer {
  std::string name;  // torchvision module name, e.g. "layer2.0.downsample.0"
  engine::kernels::Conv2dShape shape;
};

// A square conv without dilation: in_hw x in_hw input, r x r kernel.
inline engine::kernels::Conv2dShape square_conv(int64_t n, int64_t c, int64_t in_hw, int64_t k,
                                                int64_t r, int64_t stride, int64_t pad) {
  engine::kernels::Conv2dShape s;
  s.N = n;
  s.C = c;
  s.H = s.W = in_hw;
  s.K = k;
  s.R = s.S = r;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  return s;
}

// ResNet-18 (torchvision, input 3x224x224) has 20 convolutions:
//
//   module                    C -> K     kernel/stride/pad   input HxW   output PxQ
//   conv1 (stem)              3 -> 64    7x7 / 2 / 3         224         112
//   (maxpool 3x3/2: 112 -> 56, not a conv)
//   layer1.{0,1}.conv{1,2}    64 -> 64   3x3 / 1 / 1         56          56      (4 convs)
//   layer2.0.conv1            64 -> 128  3x3 / 2 / 1         56          28
//   layer2.0.conv2            128 -> 128 3x3 / 1 / 1         28          28
//   layer2.0.downsample.0     64 -> 128  1x1 / 2 / 0         56          28
//   layer2.1.conv{1,2}        128 -> 128 3x3 / 1 / 1         28          28      (2 convs)
//   layer3: as layer2 with 128 -> 256 channels, 28 -> 14                         (5 convs)
//   layer4: as layer2 with 256 -> 512 channels, 14 -> 7                          (5 convs)
//
// 1 + 4 + 3 x 5 = 20. Identical shapes are kept as separate rows so the per-pass sums are the
// network's total convolution time.
inline std::vector<ConvLayer> resnet18_convs(int64_t batch) {
  std::vector<ConvLayer> convs;
  convs.push_back({"conv1", square_conv(batch, 3, 224, 64, 7, 2, 3)});
  for (int block = 0; block < 2; ++block) {
    for (int conv = 1; conv <= 2; ++conv) {
      convs.push_back({"layer1." + std::to_string(block) + ".conv" + std::to_string(conv),
                       square_conv(batch, 64, 56, 64, 3, 1, 1)});
    }
  }
  int64_t in_channels = 64, in_hw = 56;
  for (int layer = 2; layer <= 4; ++layer) {
    const int64_t channels = in_channels * 2, hw = in_hw / 2;
    const std::string prefix = "layer" + std::to_string(layer) + ".";
    convs.push_back(
        {prefix + "0.conv1", square_conv(batch, in_channels, in_hw, channels, 3, 2, 1)});
    convs.push_back({prefix + "0.conv2", square_conv(batch, channels, hw, channels, 3, 1, 1)});
    convs.push_back(
        {prefix + "0.downsample.0", square_conv(batch, in_channels, in_hw, channels, 1, 2, 0)});
    convs.push_back({prefix + "1.conv1", square_conv(batch, channels, hw, channels, 3, 1, 1)});
    convs.push_back({prefix + "1.conv2", square_conv(batch, channels, hw, channels, 3, 1, 1)});
    in_channels = channels;
    in_hw = hw;
  }
  return convs;
}

// C2F2's two convolutions (models/c2f2.h) at 256 images, the Fashion-MNIST configs' 128 SPC-2
// pairs: the network of the papers' Fashion-MNIST experiments. An eta = 32 defense step runs
// fprop and dgrad of each 33 times (32 attack passes and the training pass) and wgrad once, and
// conv1 (C = 1) is where the input gradient an attack needs is made. Rows of their own, after
// the ResNet-18 totals, whatever --batch says (the batch is the configs').
inline std::vector<ConvLayer> c2f2_convs() {
  return {{"c2f2.conv1", square_conv(256, 1, 28, 32, 5, 1, 2)},
          {"c2f2.conv2", square_conv(256, 32, 14, 64, 5, 1, 2)}};
}

// The tile widths of our convolution kernels that `dml bench` times one by one, widest first.
inline std::vector<engine::kernels::ConvTile> conv_tile_widths() {
  using engine::kernels::ConvTile;
  return {ConvTile::Cols128, ConvTile::Cols64, ConvTile::Cols32};
}

// 2 N K P Q C R S: one multiply-add per (output element, reduction element); the same for fprop,
// dgrad and wgrad (they are three GEMMs over the same index space).
inline double conv_flops(const engine::kernels::Conv2dShape& s) {
  return engine::kernels::conv2d_flops(s);
}

// Compulsory bytes of one pass: x [N,C,H,W], w [K,C,R,S] and y [N,K,P,Q] once each, f32 (fprop
// reads x, w and writes y; dgrad reads dy, w and writes dx; wgrad reads dy, x and writes dw).
inline double conv_bytes(const engine::kernels::Conv2dShape& s) {
  return engine::kernels::conv2d_bytes(s);
}

// The learnable parameters of torchvision's ResNet-18 with its 1000-way fc, in state-dict order
// (batch-norm running statistics are buffers, not parameters, and Adam does not touch them):
// 11,689,512 values in 62 tensors.
inline std::vector<std::vector<int64_t>> resnet18_parameter_shapes() {
  std::vector<std::vector<int64_t>> shapes;
  auto conv = [&](int64_t k, int64_t c, int64_t r) { shapes.push_back({k, c, r, r}); };
  auto bn = [&](int64_t c) {
    shapes.push_back({c});  // weight
    shapes.push_back({c});  // bias
  };
  conv(64, 3, 7);
  bn(64);
  int64_t in_channels = 64;
  for (int layer = 1; layer <= 4; ++layer) {
    const int64_t channels = layer == 1 ? 64 : in_channels * 2;
    for (int block = 0; block < 2; ++block) {
      conv(channels, block == 0 ? in_channels : channels, 3);
      bn(channels);
      conv(channels, channels, 3);
      bn(channels);
      if (block == 0 && layer > 1) {  // the 1x1 stride-2 projection of the first block
        conv(channels, in_channels, 1);
        bn(channels);
      }
    }
    in_channels = channels;
  }
  shapes.push_back({1000, 512});  // fc.weight
  shapes.push_back({1000});       // fc.bias
  return shapes;
}

inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Adam reads p, g, m, v and writes p, m, v: 7 f32 = 28 bytes per parameter.
constexpr double kAdamBytesPerParam = 28.0;
// The fused PGD step reads x, x0, g and writes x_new: 16 bytes per element; the copy peer 8.
constexpr double kPgdBytesPerElement = 16.0;
constexpr double kCopyBytesPerElement = 8.0;
// Batch norm, compulsory traffic per activation element (per-channel parameters and statistics
// are [K, C] and negligible): forward-train reads x and writes y (8 B); backward reads dy and x
// and writes dx (12 B). A two-pass implementation whose tensor does not fit in L2 moves 12 and
// 20 B (statistics pass + normalize pass), so it can reach at most 67% / 60% of the copy rate on
// these byte counts; the compulsory count is the honest floor.
constexpr double kBnForwardBytesPerElement = 8.0;
constexpr double kBnBackwardBytesPerElement = 12.0;

// ---- statistics over repeated timings ----------------------------------------------------------

// The q-quantile (q in [0, 1]) with linear interpolation between order statistics, as numpy's
// default: position q (n - 1) in the sorted values. Throws on an empty list.
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) throw std::invalid_argument("percentile of an empty list");
  std::sort(values.begin(), values.end());
  const double position = q * double(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double t = position - double(below);
  return values[below] + t * (values[above] - values[below]);
}

// The current time in UTC, ISO 8601 ("2026-11-24T15:17:47Z"), for the headers and JSON files.
inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

struct Stats {
  double median = 0.0, min = 0.0, max = 0.0;  // milliseconds
};

inline Stats summarize(const std::vector<double>& ms) {
  Stats s;
  s.median = percentile(ms, 0.5);
  s.min = *std::min_element(ms.begin(), ms.end());
  s.max = *std::max_element(ms.begin(), ms.end());
  return s;
}

inline double geomean(const std::vector<double>& values) {
  if (values.empty()) return std::nan("");
  double log_sum = 0.0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / double(values.size()));
}

// How many copies of a workload's buffers to cycle through so that, by the time a copy is used
// again, the others (together at least twice the L2 size) have pushed it out of the cache:
// ceil(2 L2 / working_set), at least 1, at most max_sets. Working sets of 2 L2 or more need 1.
inline int rotation_sets(double working_set_bytes, double l2_bytes, int max_sets = 8) {
  if (working_set_bytes <= 0.0) return max_sets;
  const double sets = std::ceil(2.0 * l2_bytes / working_set_bytes);
  return static_cast<int>(std::clamp(sets, 1.0, double(max_sets)));
}

// ---- options -----------------------------------------------------------------------------------

struct Options {
  std::optional<std::string> json_path;
  int64_t repeats = 20;
  int64_t warmup = 5;
  std::string filter;  // substring of workload names; empty = all
  int64_t batch = 112;
  std::string commit;  // empty = unknown
  // The precision modes of the GEMM and convolution rows (bench_modes.h), in the order run.
  std::vector<PrecisionMode> modes = precision_modes();
};

// The GEMM kernels dml bench times in `precision`, as ENGINE_TC_GEMM spells them (engine/
// backend.h): "" (strict FP32, matmul_cuda) in fp32; wmma, mma, wgmma and wgmma-overlap in the
// tensor-core modes.
inline std::vector<std::string> gemm_kernel_names(engine::kernels::Precision precision) {
  using engine::kernels::Precision;
  if (precision == Precision::Fp32) return {""};
  return {"wmma", "mma", "wgmma", "wgmma-overlap"};
}

// The names of every workload row (ceilings are always measured), in the order they run.
inline std::vector<std::string> workload_names(int64_t batch) {
  std::vector<std::string> names;
  for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
    for (const ConvLayer& layer : resnet18_convs(batch)) {
      names.push_back("conv " + layer.name + " " + pass);
    }
  }
  for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
    for (const ConvLayer& layer : c2f2_convs()) names.push_back("conv " + layer.name + " " + pass);
  }
  // conv2's dgrad (C = 32) through the direct kernel, which dgrad takes by itself only for C <= 4.
  names.push_back("conv c2f2.conv2 dgrad-direct");
  // C2F2's passes at each forced tile width (conv1's dgrad, C = 1, runs the direct kernel: the
  // first-layer rule of kernels/conv2d/conv2d.h).
  for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
    for (const ConvLayer& layer : c2f2_convs()) {
      if (std::string(pass) == "dgrad" && engine::kernels::dgrad_is_first_layer(layer.shape)) {
        continue;
      }
      for (engine::kernels::ConvTile tile : conv_tile_widths()) {
        names.push_back("conv " + layer.name + " " + pass + " tile" +
                        std::to_string(engine::kernels::conv2d_tile_columns(tile)));
      }
    }
  }
  for (const char* k : {"K=1", "K=2"}) {
    names.push_back(std::string("bn ") + k + " forward-train");
    names.push_back(std::string("bn ") + k + " backward");
  }
  names.push_back("pgd step");
  names.push_back("adam resnet18");
  for (const char* shape : {"gemm 4096", "gemm 128x512x10000"}) {
    names.push_back(shape);
    for (const std::string& kernel : gemm_kernel_names(engine::kernels::Precision::Tf32)) {
      names.push_back(std::string(shape) + " " + kernel);
    }
  }
  return names;
}

inline bool matches_filter(const std::string& name, const std::string& filter) {
  return filter.empty() || name.find(filter) != std::string::npos;
}

// Usage errors (exit code 2) in the values of the options.
inline void validate_options(const Options& o) {
  if (o.repeats < 1 || o.repeats > 100000) {
    throw UsageError("--repeats must be in [1, 100000], got " + std::to_string(o.repeats));
  }
  // At least one untimed launch: the first one picks (and for cuDNN, times) the algorithms.
  if (o.warmup < 1 || o.warmup > 100000) {
    throw UsageError("--warmup must be in [1, 100000], got " + std::to_string(o.warmup));
  }
  // 4096 keeps every buffer's element count far from int32 limits of the kernels' grids.
  if (o.batch < 2 || o.batch > 4096 || o.batch % 2 != 0) {
    throw UsageError("--batch must be even (two BN routes) and in [2, 4096], got " +
                     std::to_string(o.batch));
  }
  if (o.json_path && o.json_path->empty()) throw UsageError("--json needs a file name");
  bool any = false;
  for (const std::string& name : workload_names(o.batch))
    any = any || matches_filter(name, o.filter);
  if (!any) throw UsageError("--filter '" + o.filter + "' matches no workload");
}

// ---- result rows -------------------------------------------------------------------------------

enum class Measure { Flops, Bytes };

struct Row {
  std::string workload;
  Stats ours;
  std::string peer;              // "" = no peer measured
  std::optional<Stats> peer_ms;  // unset when no peer was timed
  Measure measure = Measure::Bytes;
  double work = 0.0;     // FLOPs or bytes of one run
  double ceiling = 0.0;  // in the rate's unit (TFLOP/s or GB/s), measured this run
  // FLOP rows only: the compulsory bytes and the floor max(FLOPs / SGEMM rate, bytes / copy
  // rate) in ms (performance-anchors §7.2: memory-bound convs need the bandwidth term); 0 = none.
  double bytes = 0.0;
  double floor_ms = 0.0;
  std::string note;
  // GEMM and convolution rows: the precision mode (bench_modes.h; "" for the precision-free
  // rows), and the largest relative error of ours and of the peer against the sampled f64
  // reference (bench_accuracy.h), unset when not measured.
  std::string precision;
  std::optional<double> ours_error, peer_error;
  // Set when ours has no kernel in this mode: the row has no timing, only this message.
  std::string not_implemented;
};

// The time no implementation can beat on this GPU: max(FLOPs / rate, bytes / bandwidth), in ms.
inline double floor_ms(double flops, double bytes, double tflops, double gbps) {
  return std::max(flops / (tflops * 1e12), bytes / (gbps * 1e9)) * 1e3;
}

inline const char* rate_unit(Measure m) { return m == Measure::Flops ? "TFLOP/s" : "GB/s"; }

// The achieved rate of our median run, in TFLOP/s or GB/s.
inline double achieved_rate(const Row& r) {
  const double seconds = r.ours.median * 1e-3;
  return r.work / seconds / (r.measure == Measure::Flops ? 1e12 : 1e9);
}

// peer time / our time: above 1 means we are faster.
inline std::optional<double> peer_ratio(const Row& r) {
  if (!r.peer_ms) return std::nullopt;
  return r.peer_ms->median / r.ours.median;
}

inline std::optional<double> ceiling_fraction(const Row& r) {
  if (!(r.ceiling > 0.0)) return std::nullopt;
  return achieved_rate(r) / r.ceiling;
}

inline nlohmann::json stats_json(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

inline nlohmann::json row_json(const Row& r) {
  if (!r.not_implemented.empty()) {  // no timing: the workload, the mode and the reason
    return {{"workload", r.workload},
            {"precision", r.precision},
            {"not_implemented", r.not_implemented}};
  }
  nlohmann::json j;
  j["workload"] = r.workload;
  j["ours_ms"] = stats_json(r.ours);
  j["peer"] = r.peer.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.peer);
  j["peer_ms"] = r.peer_ms ? stats_json(*r.peer_ms) : nlohmann::json(nullptr);
  const std::optional<double> ratio = peer_ratio(r);
  j["ratio_peer_over_ours"] = ratio ? nlohmann::json(*ratio) : nlohmann::json(nullptr);
  j["unit"] = rate_unit(r.measure);
  j[r.measure == Measure::Flops ? "flops" : "bytes"] = r.work;
  j["achieved"] = achieved_rate(r);
  const std::optional<double> fraction = ceiling_fraction(r);
  j["ceiling"] = r.ceiling > 0.0 ? nlohmann::json(r.ceiling) : nlohmann::json(nullptr);
  j["ceiling_fraction"] = fraction ? nlohmann::json(*fraction) : nlohmann::json(nullptr);
  if (r.measure == Measure::Flops && r.bytes > 0.0) j["bytes"] = r.bytes;
  if (r.floor_ms > 0.0) {
    j["floor_ms"] = r.floor_ms;
    j["floor_fraction"] = r.floor_ms / r.ours.median;  // 1 = at the floor
  }
  if (!r.note.empty()) j["note"] = r.note;
  if (!r.precision.empty()) {
    j["precision"] = r.precision;
    j["ours_max_rel_error"] =
        r.ours_error ? nlohmann::json(*r.ours_error) : nlohmann::json(nullptr);
    j["peer_max_rel_error"] =
        r.peer_error ? nlohmann::json(*r.peer_error) : nlohmann::json(nullptr);
  }
  return j;
}

inline std::string format_header() {
  char line[256];
  std::snprintf(line, sizeof line, "%-36s %10s  %-12s %10s %9s %16s %8s %9s %9s", "workload",
                "ours ms", "peer", "peer ms", "peer/ours", "achieved", "% ceil", "ours err",
                "peer err");
  return line;
}

// An error column: "-" when not measured, else two significant digits ("3.1e-07").
inline std::string format_error(const std::optional<double>& error) {
  if (!error) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", *error);
  return text;
}

inline std::string format_row(const Row& r) {
  if (!r.not_implemented.empty())
    return r.workload + ": not implemented (" + r.not_implemented + ")";
  char ours[32], peer_ms[32] = "-", ratio[32] = "-", rate[48], fraction[32] = "-";
  std::snprintf(ours, sizeof ours, "%.3f", r.ours.median);
  if (r.peer_ms) std::snprintf(peer_ms, sizeof peer_ms, "%.3f", r.peer_ms->median);
  if (const std::optional<double> q = peer_ratio(r))
    std::snprintf(ratio, sizeof ratio, "%.2fx", *q);
  std::snprintf(rate, sizeof rate, r.measure == Measure::Flops ? "%.2f %s" : "%.0f %s",
                achieved_rate(r), rate_unit(r.measure));
  if (const std::optional<double> f = ceiling_fraction(r)) {
    std::snprintf(fraction, sizeof fraction, "%.1f%%", 100.0 * *f);
  }
  char line[512];
  std::snprintf(line, sizeof line, "%-36s %10s  %-12s %10s %9s %16s %8s %9s %9s",
                r.workload.c_str(), ours, r.peer.empty() ? "-" : r.peer.c_str(), peer_ms, ratio,
                rate, fraction, format_error(r.ours_error).c_str(),
                format_error(r.peer_error).c_str());
  std::string out = line;
  if (!r.note.empty()) out += "  (" + r.note + ")";
  return out;
}

}  // namespace dml::bench
