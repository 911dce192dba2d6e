// dml bench: our CUDA kernels against cuDNN / cuBLAS and against ceilings measured in the same run
// (issue 3, deliverable 6; docs/performance.md).
//
//   dml bench [--json FILE] [--repeats 20] [--warmup 5] [--filter SUBSTRING] [--batch 112]
//             [--commit SHA] [--precision-modes fp32,pytorch-default,tf32,bf16]
//
// Workloads (names are what --filter matches): the 20 convolutions of ResNet-18 x {fprop, dgrad,
// wgrad} vs cuDNN; multi-branch batch norm forward-train and backward with K = 1 and 2; the fused
// PGD step vs a device-to-device copy of the same images; Adam over ResNet-18's parameters; a
// 4096^3 SGEMM vs cuBLAS (in a tensor-core mode one row per GEMM kernel: wmma, mma, wgmma,
// wgmma-overlap). The
// GEMM and convolution rows run once per precision mode
// (bench_modes.h), both sides in that mode, each with its error against a sampled f64 reference
// (bench_accuracy.h); the others are precision-free and run with the fp32 mode. Method and
// byte/FLOP counts: bench_gpu.cpp and bench_table.h.
// Benchmarks are never tests: nothing here checks results, tests/ does that.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/io/file_io.h"
#include "engine/precision.h"
#include "kernels/bench/timer.h"
#include "kernels/common/check.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/conv2d/conv2d.h"
#include "tools/dml/bench_accuracy.h"
#include "tools/dml/bench_gpu.h"
#include "tools/dml/bench_table.h"
#include "tools/dml/commands.h"
#include "tools/dml/output_files.h"
#include "tools/dml/version.h"

namespace dml {

namespace {

const char* kUsage =
    "usage: dml bench [--json FILE] [--repeats N] [--warmup N] [--filter TEXT] [--batch N]\n"
    "                 [--commit SHA] [--precision-modes LIST]\n"
    "\n"
    "Times our CUDA kernels against cuDNN/cuBLAS and against a bandwidth ceiling (1 GiB\n"
    "device-to-device copy) and a FLOP-rate ceiling (cuBLAS SGEMM 8192^3, strict FP32) measured\n"
    "in the same run. The GEMM and convolution rows run in each precision mode, ours and the\n"
    "peer in the same mode. Needs a CUDA device.\n"
    "\n"
    "  --json FILE      also write the rows, ceilings, GPU name, date and commit as JSON (an\n"
    "                   existing file only with --overwrite, checked before any timing)\n"
    "  --repeats N      timed runs per measurement; the median is reported (default 20)\n"
    "  --warmup N       untimed runs before them, at least 1 (default 5)\n"
    "  --filter TEXT    only workloads whose name contains TEXT, e.g. 'conv layer1', 'wgrad',\n"
    "                   'bn', 'pgd', 'adam', 'gemm' (the ceilings are always measured)\n"
    "  --batch N        batch of the conv, batch-norm and PGD workloads (default 112, even)\n"
    "  --commit SHA     the source revision recorded in the JSON (default: the one dml was\n"
    "                   built from, as `dml --version` prints it)\n"
    "  --precision-modes LIST\n"
    "                   comma-separated modes of the GEMM and convolution rows (default: all):\n"
    "                   fp32 (strict), pytorch-default (FP32 GEMMs, TF32 convolutions), tf32,\n"
    "                   bf16; a mode without kernels prints one 'not implemented' line. The\n"
    "                   batch-norm, PGD and Adam rows are precision-free: they run with fp32.\n"
    "\n"
    "columns: ours ms and peer ms are medians; peer/ours > 1 means ours is faster; achieved is\n"
    "TFLOP/s (2 N K P Q C R S for convs) or GB/s on compulsory bytes; % ceil is achieved over the\n"
    "SGEMM or copy ceiling (fp32 mode only); ours err and peer err are the largest error of\n"
    "256 sampled outputs against an f64 CPU sum over the same inputs, relative to the sum of\n"
    "the magnitudes of its terms.\n"
    "\n"
    "usage: dml bench --train CONFIG [--set KEY=VALUE]... [--device DEV] [--steps N]\n"
    "                 [--warmup N] [--peer FILE.json]... [--json FILE [--overwrite]] [--profile]\n"
    "\n"
    "Times whole training steps of a config (dml train's own loop: batch to the device, the\n"
    "defense's PGD steps, forward, backward, optimizer step) on the CPU or a GPU: the median of\n"
    "--steps (default 10) after --warmup (default 2). --peer adds the same step timed by another\n"
    "framework (tools/peers/pytorch_train_step.py writes such a file) with peer/ours.\n"
    "On a GPU it also reports the kernels launched per step and per attack pass, the device\n"
    "allocations per step after warm-up and the GPU-busy fraction, from one more step run under\n"
    "the profiler; --profile prints one attack pass of that step kernel by kernel (time, FLOPs,\n"
    "bytes, fraction of its floor).\n";

bench::Options parse_options(Args& args) {
  bench::Options o;
  o.json_path = args.take_optional("--json");
  o.repeats = args.take_int("--repeats", o.repeats);
  o.warmup = args.take_int("--warmup", o.warmup);
  o.filter = args.take_string("--filter", "");
  o.batch = args.take_int("--batch", o.batch);
  o.commit = args.take_string("--commit", build_commit());
  o.modes = bench::parse_precision_modes(
      args.take_string("--precision-modes", bench::all_precision_mode_names()));
  const ExistingResult existing = take_existing_result_flags(args, /*can_resume=*/false);
  args.finish();
  bench::validate_options(o);
  if (o.json_path) check_result_file(*o.json_path, "--json", existing);  // before the minutes
  return o;
}

void print_rows(const std::vector<bench::Row>& rows, size_t from) {
  for (size_t i = from; i < rows.size(); ++i)
    std::printf("%s\n", bench::format_row(rows[i]).c_str());
  std::fflush(stdout);
}

// A mode whose precision has no kernels in this build (engine::check_precision_implemented):
// the message, or "" when it can run.
std::string missing_kernels(const bench::PrecisionMode& mode) {
  try {
    engine::check_precision_implemented(mode.gemm, "precision mode " + mode.name);
    engine::check_precision_implemented(mode.conv, "precision mode " + mode.name);
  } catch (const engine::Error& e) {
    return e.what();
  }
  return "";
}

nlohmann::json modes_json(const std::vector<bench::PrecisionMode>& modes) {
  nlohmann::json out = nlohmann::json::array();
  for (const bench::PrecisionMode& mode : modes) {
    const std::string missing = missing_kernels(mode);
    out.push_back(
        {{"name", mode.name},
         {"gemm", engine::precision_name(mode.gemm)},
         {"conv", engine::precision_name(mode.conv)},
         {"what", mode.description},
         {"not_implemented", missing.empty() ? nlohmann::json(nullptr) : nlohmann::json(missing)}});
  }
  return out;
}

void write_json(const std::string& path, const bench::Context& ctx, const std::string& gpu,
                const std::string& date, const std::vector<bench::Row>& rows) {
  const bench::Ceilings& c = ctx.ceilings;
  nlohmann::json j;
  j["tool"] = "dml bench";
  j["gpu"] = gpu;
  j["date"] = date;
  j["commit"] =
      ctx.options.commit.empty() ? nlohmann::json(nullptr) : nlohmann::json(ctx.options.commit);
  j["batch"] = ctx.options.batch;
  j["repeats"] = ctx.options.repeats;
  j["warmup"] = ctx.options.warmup;
  j["filter"] = ctx.options.filter;
  j["precision_modes"] = modes_json(ctx.options.modes);
  j["error_reference"] = "f64 CPU sum over the same inputs at " +
                         std::to_string(bench::kErrorSamples) +
                         " sampled outputs; |y - r| / sum of |terms|";
  j["l2_bytes"] = ctx.l2_bytes;
  j["cudnn"] = engine::kernels::cudnn_available();
  j["ceilings"] = {{"copy",
                    {{"what", "cudaMemcpyAsync device-to-device, 1 GiB"},
                     {"bytes", c.copy_bytes},
                     {"ms", bench::stats_json(c.copy_ms)},
                     {"gbps", c.copy_gbps}}},
                   {"sgemm",
                    {{"what", "cublasSgemm " + std::to_string(c.sgemm_size) + "^3, FP32"},
                     {"size", c.sgemm_size},
                     {"ms", bench::stats_json(c.sgemm_ms)},
                     {"tflops", c.sgemm_tflops}}}};
  nlohmann::json out_rows = nlohmann::json::array();
  for (const bench::Row& row : rows) out_rows.push_back(bench::row_json(row));
  j["rows"] = out_rows;

  engine::detail::write_file_atomically(path, j.dump(2) + "\n");  // a kill keeps the old file
}

}  // namespace

int run_bench(Args& args) {
  if (args.take_flag("--help") || args.take_flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (const std::optional<std::string> config = args.take_optional("--train")) {
    return run_bench_train(*config, args);  // bench_train.cpp
  }
  bench::Context ctx;
  ctx.options = parse_options(args);  // usage errors (exit 2) before the device check
  if (engine::cuda_device_count() == 0) {
    std::fprintf(stderr,
                 "dml bench needs a CUDA device: none is visible (or this binary was built "
                 "without CUDA)\n");
    return 1;
  }
  ctx.l2_bytes = engine::kernels::cuda_l2_cache_bytes();
  const std::string gpu = engine::kernels::cuda_device_name(0);
  const std::string date = bench::utc_now();

  std::printf("dml bench: %s, %s, commit %s\n", gpu.c_str(), date.c_str(),
              ctx.options.commit.empty() ? "unknown" : ctx.options.commit.c_str());
  std::printf("batch %lld, median of %lld runs after %lld warm-up, L2 %.0f MB%s\n",
              static_cast<long long>(ctx.options.batch),
              static_cast<long long>(ctx.options.repeats),
              static_cast<long long>(ctx.options.warmup), double(ctx.l2_bytes) / 1e6,
              engine::kernels::cudnn_available() ? "" : ", built without cuDNN");
  bench::measure_ceilings(ctx);
  std::printf(
      "ceilings: copy %.0f GB/s (1 GiB D2D, read + write, %.3f ms); "
      "cuBLAS SGEMM %lld^3 %.2f TFLOP/s (%.3f ms)\n\n",
      ctx.ceilings.copy_gbps, ctx.ceilings.copy_ms.median,
      static_cast<long long>(ctx.ceilings.sgemm_size), ctx.ceilings.sgemm_tflops,
      ctx.ceilings.sgemm_ms.median);
  std::printf("%s\n", bench::format_header().c_str());
  std::fflush(stdout);

  std::vector<bench::Row> rows;
  for (const bench::PrecisionMode& mode : ctx.options.modes) {
    const std::string missing = missing_kernels(mode);
    if (!missing.empty()) {
      std::printf("== precision mode %s: not implemented (%s)\n\n", mode.name.c_str(),
                  missing.c_str());
      continue;
    }
    std::printf("%s\n", bench::format_mode_header(mode).c_str());
    const bool precision_free = mode.name == "fp32";  // bn, pgd and adam run once, here
    std::vector<std::function<void()>> families;
    families.push_back([&] { bench::bench_convs(ctx, mode, rows); });
    if (precision_free) {
      families.push_back([&] { bench::bench_batch_norm(ctx, rows); });
      families.push_back([&] { bench::bench_pgd_step(ctx, rows); });
      families.push_back([&] { bench::bench_adam(ctx, rows); });
    }
    families.push_back([&] { bench::bench_gemm(ctx, mode, rows); });
    for (const std::function<void()>& family : families) {
      const size_t before = rows.size();
      family();
      print_rows(rows, before);
    }
    std::printf("\n");
  }
  if (ctx.options.json_path) {
    write_json(*ctx.options.json_path, ctx, gpu, date, rows);
    std::printf("\nwrote %s\n", ctx.options.json_path->c_str());
  }
  return 0;
}

}  // namespace dml
