// dml bench --train: the wall time of whole training steps of a config, on the CPU or a GPU, side
// by side with the same step timed by another framework ("our training iteration vs
// PyTorch on the same GPU"; shared/research/performance-anchors.md §9, workload W7 for
// configs/fashion/est.json and act.json: C2F2, 128 SPC-2 pairs = 256 images, eta = 32).
//
//   dml bench --train CONFIG [--set KEY=VALUE]... [--device DEV] [--steps 10] [--warmup 2]
//                            [--peer FILE.json]... [--json FILE]
//
// What is timed is the product's own loop (trainer.cpp, through TrainOptions::timing): one step =
// the batch copied to the device, the defense's PGD steps (if any), the training forward and
// backward, the optimizer step, the device synchronized. Data loading runs ahead in the loader's
// threads; the step's clock starts after the batch is loaded, so loading is never counted (the
// peer leaves it out too). The first --warmup steps
// (allocator and cuDNN warm-up, first-touch page faults) are dropped; the median of the next
// --steps is reported. The run writes into a temporary output_dir that is removed afterwards.
//
// On a GPU, one more step runs under the profiler after the timed ones, for the instruments
// (bench_instruments.h, docs/performance.md): kernels launched per step and per attack pass,
// cudaMalloc calls per step after warm-up, the GPU-busy fraction, and with --profile one attack
// pass kernel by kernel against its floor.
//
// Peers: tools/peers/pytorch_train_step.py times the same config in PyTorch (bench_peers.h has
// the file format); --peer adds its rows that match this run (config, device type, batch size,
// passes per step, precision) with the ratio peer/ours (> 1: ours is faster). The precision is
// the config key `precision`, or --precision (every subcommand's option), which wins over it.
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/io/file_io.h"
#include "engine/precision.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "tools/dml/bench_instruments.h"
#include "tools/dml/bench_peers.h"
#include "tools/dml/commands.h"
#include "tools/dml/config.h"
#include "tools/dml/output_files.h"
#include "tools/dml/result_json.h"
#include "tools/dml/trainer.h"
#include "tools/dml/version.h"

namespace dml {

namespace {

struct TrainBenchOptions {
  std::string config_path;
  std::vector<std::string> sets;
  std::optional<std::string> device;
  int64_t steps = 10;
  int64_t warmup = 2;
  std::vector<std::string> peer_files;
  std::optional<std::string> json_path;
  bool profile = false;  // print (and write) one attack pass kernel by kernel
};

std::vector<bench::PeerRow> read_peer_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw UsageError("--peer: cannot open '" + path + "'");
  }
  return bench::parse_peer_file(read_result_file(path), path);
}

// "cpu (2 threads)" or the GPU's name.
std::string device_description(const engine::Device& device) {
  if (device.is_cuda()) return engine::kernels::cuda_device_name(device.index);
  return "cpu (" + std::to_string(omp_get_max_threads()) + " threads)";
}

TrainBenchOptions take_train_bench_options(const std::string& config_path, Args& args) {
  TrainBenchOptions o;
  o.config_path = config_path;
  o.sets = args.take_all("--set");
  o.device = args.take_optional("--device");
  o.steps = args.take_int("--steps", o.steps);
  o.warmup = args.take_int("--warmup", o.warmup);
  o.peer_files = args.take_all("--peer");
  o.json_path = args.take_optional("--json");
  o.profile = args.take_flag("--profile");
  const ExistingResult existing = take_existing_result_flags(args, /*can_resume=*/false);
  args.finish();
  if (o.json_path) check_result_file(*o.json_path, "--json", existing);  // before the steps
  if (o.steps < 1) throw UsageError("--steps must be >= 1");
  if (o.warmup < 0) throw UsageError("--warmup must be >= 0");
  return o;
}

// The run to time: the config with our --set overrides, --device and --precision (which wins over
// the config key, as in dml train) applied, writing into `scratch`.
TrainConfig resolve_bench_config(const TrainBenchOptions& o, const std::filesystem::path& scratch) {
  nlohmann::json config = load_config_file(o.config_path);
  for (const std::string& assignment : o.sets) apply_override(config, assignment);
  if (o.device) apply_override(config, "device=\"" + *o.device + "\"");
  if (engine::precision_is_set()) {
    apply_override(
        config, std::string("precision=\"") + engine::precision_name(engine::precision()) + "\"");
  }
  config["output_dir"] = scratch.string();
  return resolve_config(config, o.config_path);
}

std::vector<bench::PeerRow> read_peer_files(const std::vector<std::string>& files) {
  std::vector<bench::PeerRow> peers;
  for (const std::string& file : files) {
    for (const bench::PeerRow& row : read_peer_file(file)) peers.push_back(row);
  }
  return peers;
}

// Trains for `steps` optimizer steps in `scratch` (removed before and after, also on an error),
// recording each step's time into `timing`; dml train's exit code.
int run_training_steps(const TrainConfig& resolved, const std::filesystem::path& scratch,
                       int64_t steps, StepTiming& timing) {
  TrainOptions train_options;
  train_options.timing = &timing;
  train_options.stop_after_batches = steps;
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  int code = 0;
  try {
    code = train(resolved, train_options);
  } catch (...) {
    std::filesystem::remove_all(scratch, ignored);
    throw;
  }
  std::filesystem::remove_all(scratch, ignored);
  return code;
}

// The steps after the warm-up: their times in ms and their device counters.
struct TimedSteps {
  std::vector<double> ms;
  std::vector<bench::DeviceCounters> counters;
};

TimedSteps timed_steps(const StepTiming& timing, const TrainBenchOptions& o,
                       int64_t profiled_steps) {
  if (static_cast<int64_t>(timing.seconds.size()) < o.warmup + o.steps + profiled_steps) {
    throw UsageError(o.config_path + ": training ended after " +
                     std::to_string(timing.seconds.size()) + " steps, fewer than --warmup + " +
                     "--steps = " + std::to_string(o.warmup + o.steps) +
                     (profiled_steps > 0 ? " and the profiled step" : ""));
  }
  TimedSteps timed;
  for (size_t i = static_cast<size_t>(o.warmup); i < static_cast<size_t>(o.warmup + o.steps); ++i) {
    timed.ms.push_back(1000.0 * timing.seconds[i]);
    timed.counters.push_back(timing.counters[i]);
  }
  return timed;
}

// What a run printed and wrote: the measurements and the names that describe them.
struct TrainBenchResult {
  std::string device_type;  // "cpu" or "cuda"
  std::string description;  // device_description
  std::string precision;    // our precision policy's name
  std::string commit;
  bench::Stats ours;
  double images_per_s = 0.0;
  bench::Instruments instruments;
};

void print_header_and_our_row(const TrainBenchOptions& o, const StepTiming& timing,
                              const TrainBenchResult& r) {
  std::printf("\ndml bench --train %s: %s, precision %s, commit %s, %s\n", o.config_path.c_str(),
              r.description.c_str(), r.precision.c_str(),
              r.commit.empty() ? "unknown" : r.commit.c_str(), bench::utc_now().c_str());
  std::printf(
      "%lld images and %lld forward/backward passes per step; median of %lld steps after "
      "%lld warm-up\n\n",
      static_cast<long long>(timing.images), static_cast<long long>(timing.passes),
      static_cast<long long>(o.steps), static_cast<long long>(o.warmup));
  // launches, allocs and busy: bench_instruments.h; '-' on the CPU.
  const bench::InstrumentColumns columns = r.device_type == "cuda"
                                               ? bench::instrument_columns(r.instruments)
                                               : bench::InstrumentColumns{};
  std::printf("%-44s %12s %12s %12s %10s %10s %7s %7s %10s\n", "implementation", "ms/step", "min",
              "max", "images/s", "launches", "allocs", "busy", "peer/ours");
  std::printf("%-44s %12.1f %12.1f %12.1f %10.1f %10s %7s %7s %10s\n", "ours (dml)", r.ours.median,
              r.ours.min, r.ours.max, r.images_per_s, columns.launches.c_str(),
              columns.allocs.c_str(), columns.busy.c_str(), "");
}

// Prints the peer rows that match our run, with peer/ours, and says how many did not; their JSON.
nlohmann::json print_peer_rows(const std::vector<bench::PeerRow>& peers,
                               const bench::OurRun& our_run, const bench::Stats& ours) {
  nlohmann::json peer_json = nlohmann::json::array();
  int64_t unmatched = 0;
  for (const bench::PeerRow& p : peers) {
    if (!bench::peer_matches(p, our_run)) {
      ++unmatched;
      continue;
    }
    // A peer in another precision than ours (PyTorch's default) says so in its label.
    const std::string label = p.peer + " " + p.variant +
                              (p.precision == our_run.precision ? "" : " [" + p.precision + "]");
    const double ratio = p.ms.median / ours.median;
    std::printf("%-44s %12.1f %12.1f %12.1f %10.1f %10s %7s %7s %9.2fx\n", label.c_str(),
                p.ms.median, p.ms.min, p.ms.max, double(p.images) / (p.ms.median / 1000.0), "-",
                "-", "-", ratio);
    peer_json.push_back({{"peer", p.peer},
                         {"variant", p.variant},
                         {"device_name", p.device_name},
                         {"threads", p.threads},
                         {"precision", p.precision},
                         {"steps", p.steps},
                         {"ms", bench::stats_json(p.ms)},
                         {"ratio_peer_over_ours", ratio}});
  }
  if (unmatched > 0) {
    std::printf(
        "(%lld peer rows skipped: another config, --set overrides, device, batch size, passes "
        "per step, CPU thread count or precision)\n",
        static_cast<long long>(unmatched));
  }
  return peer_json;
}

void write_train_bench_json(const TrainBenchOptions& o, const StepTiming& timing,
                            const TrainBenchResult& r, const std::vector<double>& step_ms,
                            const nlohmann::json& profile, const nlohmann::json& peer_json) {
  const bool cuda = r.device_type == "cuda";
  nlohmann::json j;
  j["tool"] = "dml bench --train";
  j["config"] = o.config_path;
  j["overrides"] = o.sets;
  j["device"] = r.device_type;
  j["device_name"] = r.description;
  j["threads"] = cuda ? nlohmann::json(nullptr) : nlohmann::json(omp_get_max_threads());
  j["precision"] = r.precision;
  j["commit"] = r.commit.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.commit);
  j["date"] = bench::utc_now();
  j["images"] = timing.images;
  j["passes"] = timing.passes;
  j["steps"] = o.steps;
  j["warmup"] = o.warmup;
  j["ms"] = bench::stats_json(r.ours);
  j["step_ms"] = step_ms;
  j["images_per_s"] = r.images_per_s;
  j["instruments"] = cuda ? bench::instruments_json(r.instruments) : nlohmann::json(nullptr);
  j["profile"] = profile;
  j["peers"] = peer_json;
  engine::detail::write_file_atomically(*o.json_path, j.dump(2) + "\n");
  std::printf("\nwrote %s\n", o.json_path->c_str());
}

}  // namespace

int run_bench_train(const std::string& config_path, Args& args) {
  const TrainBenchOptions o = take_train_bench_options(config_path, args);
  // Usage errors first (config, peers), then the device.
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() /
      ("dml-bench-train-" + std::to_string(static_cast<long long>(getpid())));
  const TrainConfig resolved = resolve_bench_config(o, scratch);
  const std::vector<bench::PeerRow> peers = read_peer_files(o.peer_files);
  const engine::Device device = parse_device_option(resolved.device, "config key 'device'");
  if (o.profile && !device.is_cuda()) {
    throw UsageError("--profile times CUDA kernels: it needs --device cuda");
  }

  // On a GPU, one more step after the timed ones runs under the profiler (its holds make it
  // slower, so it is not timed): the launches per attack pass, the GPU-busy fraction, --profile.
  StepTiming timing;
  const int64_t profiled_steps = device.is_cuda() ? 1 : 0;
  if (device.is_cuda()) timing.profile_step = o.warmup + o.steps;
  const int code =
      run_training_steps(resolved, scratch, o.warmup + o.steps + profiled_steps, timing);
  if (code != 0) return code;
  const TimedSteps timed = timed_steps(timing, o, profiled_steps);

  TrainBenchResult r;
  r.device_type = device.is_cuda() ? "cuda" : "cpu";
  r.description = device_description(device);
  r.precision = engine::precision_name(resolved.precision);
  r.commit = build_commit();
  r.ours = bench::summarize(timed.ms);
  r.images_per_s = double(timing.images) / (r.ours.median / 1000.0);
  r.instruments = bench::summarize_instruments(timed.counters, timing.profile, r.ours.median);
  print_header_and_our_row(o, timing, r);

  bench::OurRun our_run;
  our_run.config_path = o.config_path;
  our_run.device = r.device_type;
  our_run.images = timing.images;
  our_run.passes = timing.passes;
  our_run.threads = omp_get_max_threads();
  our_run.overrides = o.sets;
  our_run.precision = r.precision;
  const nlohmann::json peer_json = print_peer_rows(peers, our_run, r.ours);

  const bench::FloorRates rates = bench::floor_rates_for(r.description);
  const bench::PassRange pass = bench::attack_pass(timing.profile);
  if (device.is_cuda()) std::printf("\n%s", bench::format_instruments(r.instruments).c_str());
  if (o.profile) {
    std::printf("\n%s", bench::format_profile(timing.profile, pass, rates).c_str());
  }
  if (o.json_path) {
    const nlohmann::json profile =
        o.profile ? bench::profile_json(timing.profile, pass, rates) : nlohmann::json(nullptr);
    write_train_bench_json(o, timing, r, timed.ms, profile, peer_json);
  }
  return 0;
}

}  // namespace dml
