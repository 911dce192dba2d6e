// The instruments of `dml bench --train` (issue 32, deliverable 5; docs/performance.md), the
// parts that need no GPU, header-only so tests/tools/bench_test.cpp can check them: the device
// counters of the timed steps, the one-pass profile of a profiled step (kernel by kernel, with
// its floor) and the GPU-busy fraction, as table lines and JSON. The counters and the profiler
// themselves are kernels/common/device_counters.h.
//
// Units: milliseconds, FLOPs, bytes; rates in TFLOP/s (1e12) and GB/s (1e9).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/device_counters.h"

namespace dml::bench {

using engine::kernels::DeviceCounters;
using engine::kernels::ProfiledLaunch;

// The rates a kernel's floor is taken at: an FP32 FLOP rate and a memory bandwidth.
struct FloorRates {
  std::string source;
  double tflops = 0.0;
  double gbps = 0.0;
};

// The H200's were measured by `dml bench` in the same run as our only GPU step times
// (docs/performance.md, 2026-11-27); no strict-FP32 SGEMM has been measured on an H100 yet, so
// its FLOP rate is the datasheet's FFMA peak and its bandwidth the copy measured there
// (shared/research/performance-anchors.md). Any other device (the CPU emulator) gets the H200's.
inline FloorRates floor_rates_for(const std::string& device_name) {
  if (device_name.find("H100") != std::string::npos) {
    return {
        "H100: FP32 FFMA peak 66.9 TFLOP/s (datasheet), copy 3000 GB/s (measured, "
        "performance-anchors.md)",
        66.9, 3000.0};
  }
  return {
      "H200 as measured 2026-11-27 (docs/performance.md): cuBLAS SGEMM 51.3 TFLOP/s, "
      "D2D copy 4253 GB/s",
      51.3, 4253.0};
}

// max(FLOPs / rate, bytes / bandwidth) in ms over the counts the launch knows; none when it
// knows neither.
inline std::optional<double> launch_floor_ms(const ProfiledLaunch& l, const FloorRates& r) {
  if (l.flops < 0.0 && l.bytes < 0.0) return std::nullopt;
  double ms = 0.0;
  if (l.flops >= 0.0) ms = std::max(ms, l.flops / (r.tflops * 1e12) * 1e3);
  if (l.bytes >= 0.0) ms = std::max(ms, l.bytes / (r.gbps * 1e9) * 1e3);
  return ms;
}

// Launches [begin, end) of a profiled step. An attack pass (forward, loss, input gradient, PGD
// step) ends with its pgd_step launch, so pass k is what follows the (k-1)-th pgd_step up to and
// including the k-th. The profile shows pass 2 when there are two or more (pass 1 also holds the
// defense's clean forward and the random start), pass 1 when there is one, and the whole step
// (number 0) when the step has no attack.
struct PassRange {
  size_t begin = 0, end = 0;
  int64_t number = 0;  // 1-based; 0 = the whole step
  int64_t passes = 0;  // attack passes in the step (pgd_step launches)
};

inline PassRange attack_pass(const std::vector<ProfiledLaunch>& launches) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < launches.size(); ++i) {
    if (launches[i].name == "pgd_step") ends.push_back(i + 1);
  }
  const int64_t passes = static_cast<int64_t>(ends.size());
  if (ends.empty()) return {0, launches.size(), 0, 0};
  if (ends.size() == 1) return {0, ends[0], 1, passes};
  return {ends[0], ends[1], 2, passes};
}

inline int64_t kernel_launches_in(const std::vector<ProfiledLaunch>& launches, size_t begin,
                                  size_t end) {
  int64_t n = 0;
  for (size_t i = begin; i < end; ++i) n += launches[i].library ? 0 : 1;
  return n;
}

inline double launch_ms_in(const std::vector<ProfiledLaunch>& launches, size_t begin, size_t end) {
  double ms = 0.0;
  for (size_t i = begin; i < end; ++i) ms += launches[i].ms;
  return ms;
}

// What the table and the JSON say about the counters and the profiled step.
struct Instruments {
  // Over the timed steps (after warm-up): the fewest and most kernel launches of a step, and the
  // most library calls, cudaMalloc calls and stream-ordered workspace allocations of a step.
  int64_t launches_min = 0, launches_max = 0;
  int64_t library_calls_max = 0, allocations_max = 0, workspace_allocations_max = 0;
  // From the profiled step (none without one).
  std::optional<int64_t> launches_per_pass;
  std::optional<double> kernel_ms;      // the profiled step's launches' times, summed
  std::optional<double> busy_fraction;  // kernel_ms / the median timed step
};

inline Instruments summarize_instruments(const std::vector<DeviceCounters>& timed_steps,
                                         const std::vector<ProfiledLaunch>& profile,
                                         double median_step_ms) {
  Instruments s;
  for (size_t i = 0; i < timed_steps.size(); ++i) {
    const DeviceCounters& c = timed_steps[i];
    s.launches_min = i == 0 ? c.kernel_launches : std::min(s.launches_min, c.kernel_launches);
    s.launches_max = std::max(s.launches_max, c.kernel_launches);
    s.library_calls_max = std::max(s.library_calls_max, c.library_calls);
    s.allocations_max = std::max(s.allocations_max, c.device_allocations);
    s.workspace_allocations_max = std::max(s.workspace_allocations_max, c.workspace_allocations);
  }
  if (!profile.empty()) {
    const PassRange pass = attack_pass(profile);
    if (pass.number > 0) s.launches_per_pass = kernel_launches_in(profile, pass.begin, pass.end);
    s.kernel_ms = launch_ms_in(profile, 0, profile.size());
    if (median_step_ms > 0.0) s.busy_fraction = *s.kernel_ms / median_step_ms;
  }
  return s;
}

// "1234" or "1230-1234" when the timed steps differ.
inline std::string launch_range(const Instruments& s) {
  std::string text = std::to_string(s.launches_min);
  if (s.launches_max != s.launches_min) text += "-" + std::to_string(s.launches_max);
  return text;
}

// The table's columns for ours: launches per step, cudaMalloc calls per step after warm-up, and
// the GPU-busy fraction ('-' where unknown; the default is the CPU's row).
struct InstrumentColumns {
  std::string launches = "-", allocs = "-", busy = "-";
};

inline InstrumentColumns instrument_columns(const Instruments& s) {
  InstrumentColumns c;
  c.launches = launch_range(s);
  c.allocs = std::to_string(s.allocations_max);
  if (s.busy_fraction) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f%%", 100.0 * *s.busy_fraction);
    c.busy = text;
  }
  return c;
}

// The lines under the table.
inline std::string format_instruments(const Instruments& s) {
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line,
                "kernels launched per step: %s (+ %lld cuBLAS/cuDNN calls); per attack pass: %s\n",
                launch_range(s).c_str(), static_cast<long long>(s.library_calls_max),
                s.launches_per_pass ? std::to_string(*s.launches_per_pass).c_str() : "-");
  out += line;
  std::snprintf(line, sizeof line,
                "device allocations per step after warm-up: %lld cudaMalloc, %lld stream-ordered "
                "workspaces (cudaMallocAsync)\n",
                static_cast<long long>(s.allocations_max),
                static_cast<long long>(s.workspace_allocations_max));
  out += line;
  if (s.busy_fraction) {
    std::snprintf(line, sizeof line,
                  "GPU busy: %.1f%% of a step (%.3f ms of kernel time in the profiled step over "
                  "the median step)\n",
                  100.0 * *s.busy_fraction, *s.kernel_ms);
    out += line;
  }
  return out;
}

inline nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

inline nlohmann::json instruments_json(const Instruments& s) {
  return {{"kernel_launches_per_step", {{"min", s.launches_min}, {"max", s.launches_max}}},
          {"library_calls_per_step", s.library_calls_max},
          {"device_allocations_per_step", s.allocations_max},
          {"workspace_allocations_per_step", s.workspace_allocations_max},
          {"kernel_launches_per_attack_pass",
           s.launches_per_pass ? nlohmann::json(*s.launches_per_pass) : nlohmann::json(nullptr)},
          {"profiled_kernel_ms", optional_json(s.kernel_ms)},
          {"gpu_busy_fraction", optional_json(s.busy_fraction)}};
}

// One row of the profile: index, name, ms, GFLOP, MB, floor ms, % of floor ('-' where unknown);
// '*' after the time when the GPU may have idled before the launch (its time may hold idle).
inline std::string format_profile_row(size_t index, const ProfiledLaunch& l, const FloorRates& r) {
  char gflop[32] = "-", mb[32] = "-", floor[32] = "-", fraction[32] = "-";
  if (l.flops >= 0.0) std::snprintf(gflop, sizeof gflop, "%.4f", l.flops / 1e9);
  if (l.bytes >= 0.0) std::snprintf(mb, sizeof mb, "%.3f", l.bytes / 1e6);
  if (const std::optional<double> f = launch_floor_ms(l, r)) {
    std::snprintf(floor, sizeof floor, "%.4f", *f);
    if (l.ms > 0.0) std::snprintf(fraction, sizeof fraction, "%.1f%%", 100.0 * *f / l.ms);
  }
  char line[512];
  std::snprintf(line, sizeof line, "%4zu  %-28s %9.4f%s %10s %10s %9s %8s  %s", index,
                l.name.c_str(), l.ms, l.after_idle ? "*" : " ", gflop, mb, floor, fraction,
                l.label.c_str());
  return line;
}

inline std::string format_profile(const std::vector<ProfiledLaunch>& launches,
                                  const PassRange& pass, const FloorRates& r) {
  std::string out;
  char line[512];
  if (pass.number == 0) {
    out += "profile of the whole step (it has no attack pass):\n";
  } else {
    std::snprintf(line, sizeof line, "profile of attack pass %lld of %lld:\n",
                  static_cast<long long>(pass.number), static_cast<long long>(pass.passes));
    out += line;
  }
  std::snprintf(line, sizeof line, "floors at %s\n", r.source.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%4s  %-28s %10s %10s %10s %9s %8s  %s\n", "#", "kernel", "ms",
                "GFLOP", "MB", "floor ms", "% floor", "launch");
  out += line;
  bool any_idle = false;
  for (size_t i = pass.begin; i < pass.end; ++i) {
    out += format_profile_row(i - pass.begin + 1, launches[i], r) + "\n";
    any_idle = any_idle || launches[i].after_idle;
  }
  std::snprintf(line, sizeof line, "%lld kernels, %lld library calls, %.4f ms\n",
                static_cast<long long>(kernel_launches_in(launches, pass.begin, pass.end)),
                static_cast<long long>(pass.end - pass.begin -
                                       kernel_launches_in(launches, pass.begin, pass.end)),
                launch_ms_in(launches, pass.begin, pass.end));
  out += line;
  if (any_idle) {
    out +=
        "* the GPU had finished the launches before this one when it was issued: its time may "
        "include idle time (always so on the CPU emulator)\n";
  }
  return out;
}

inline nlohmann::json profile_json(const std::vector<ProfiledLaunch>& launches,
                                   const PassRange& pass, const FloorRates& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = pass.begin; i < pass.end; ++i) {
    const ProfiledLaunch& l = launches[i];
    const std::optional<double> floor = launch_floor_ms(l, r);
    rows.push_back({{"kernel", l.name},
                    {"launch", l.label},
                    {"library", l.library},
                    {"ms", l.ms},
                    {"after_idle", l.after_idle},
                    {"flops", l.flops >= 0.0 ? nlohmann::json(l.flops) : nlohmann::json(nullptr)},
                    {"bytes", l.bytes >= 0.0 ? nlohmann::json(l.bytes) : nlohmann::json(nullptr)},
                    {"floor_ms", optional_json(floor)},
                    {"floor_fraction", floor && l.ms > 0.0 ? nlohmann::json(*floor / l.ms)
                                                           : nlohmann::json(nullptr)}});
  }
  return {{"pass", pass.number},
          {"attack_passes", pass.passes},
          {"floor_rates",
           {{"source", r.source}, {"fp32_tflops", r.tflops}, {"bandwidth_gbps", r.gbps}}},
          {"launches", rows}};
}

}  // namespace dml::bench
