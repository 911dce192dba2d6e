// The GPU-free parts of `dml bench` (tools/dml/bench_table.h): the ResNet-18 workload tables and
// their FLOP counts, the statistics over timings, L2 rotation, option validation and the row
// formatting. The timing itself needs a GPU and is exercised by running `dml bench` there.
// Also the instruments of `dml bench --train` (bench_instruments.h): floors, the attack pass,
// counts, busy fraction, profile (its peer files: bench_peers_test.cpp).
// The precision modes (bench_modes.h) and the sampled f64 references of the error columns
// (bench_accuracy.h).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <string>

#include "kernels/conv2d/conv2d.h"
#include "tools/dml/bench_accuracy.h"
#include "tools/dml/bench_instruments.h"
#include "tools/dml/bench_modes.h"
#include "tools/dml/bench_peers.h"
#include "tools/dml/bench_table.h"

using namespace dml::bench;

TEST_CASE("bench conv table: ResNet-18 has 20 convolutions with torchvision's shapes") {
  const std::vector<ConvLayer> convs = resnet18_convs(112);
  REQUIRE(convs.size() == 20);
  std::set<std::string> names;
  for (const ConvLayer& c : convs) names.insert(c.name);
  CHECK(names.size() == 20);  // every module once
  CHECK(convs[0].name == "conv1");
  CHECK(convs[19].name == "layer4.1.conv2");

  // conv1: 3 -> 64, 7x7 stride 2 pad 3 on 224 -> 112.
  const auto& stem = convs[0].shape;
  CHECK(stem.C == 3);
  CHECK(stem.K == 64);
  CHECK(stem.R == 7);
  CHECK(stem.stride_h == 2);
  CHECK(stem.pad_h == 3);
  CHECK(stem.out_h() == 112);
  CHECK(stem.out_w() == 112);

  // The downsample projections: 1x1 stride 2, no padding, C -> 2C, halving the map.
  int downsamples = 0;
  for (const ConvLayer& c : convs) {
    if (c.name.find("downsample") == std::string::npos) continue;
    ++downsamples;
    CHECK(c.shape.R == 1);
    CHECK(c.shape.stride_h == 2);
    CHECK(c.shape.pad_h == 0);
    CHECK(c.shape.K == 2 * c.shape.C);
    CHECK(c.shape.out_h() == c.shape.H / 2);
  }
  CHECK(downsamples == 3);

  // layer4.1.conv2: 512 -> 512, 3x3/1/1 on 7x7.
  const auto& last = convs[19].shape;
  CHECK(last.C == 512);
  CHECK(last.K == 512);
  CHECK(last.H == 7);
  CHECK(last.out_h() == 7);
  for (const ConvLayer& c : convs) CHECK(c.shape.N == 112);
}

TEST_CASE("bench conv table: FLOP counts worked out by hand") {
  const std::vector<ConvLayer> convs = resnet18_convs(112);
  // conv1: 2 N K P Q C R S = 2 * 112 * 64 * 112 * 112 * 3 * 7 * 7
  //   112 * 64 = 7168; * 12544 (112^2) = 89,915,392; * 147 (3*49) = 13,217,562,624; * 2
  //   = 26,435,125,248 (performance-anchors §7.2: "26.4 GFLOP").
  CHECK(conv_flops(convs[0].shape) == 26435125248.0);
  // layer1.0.conv1: 2 * 112 * 64 * 56 * 56 * 64 * 9
  //   7168 * 3136 = 22,478,848; * 576 = 12,947,816,448; * 2 = 25,895,632,896 ("25.9 GFLOP").
  CHECK(convs[1].name == "layer1.0.conv1");
  CHECK(conv_flops(convs[1].shape) == 25895632896.0);
  // layer2.0.downsample.0: 2 * 112 * 128 * 28 * 28 * 64 * 1 * 1
  //   112 * 128 = 14336; * 784 = 11,239,424; * 64 = 719,323,136; * 2 = 1,438,646,272.
  CHECK(convs[7].name == "layer2.0.downsample.0");
  CHECK(conv_flops(convs[7].shape) == 1438646272.0);
  // Compulsory bytes of layer2.0.downsample.0 at N = 1: x 64*56*56 = 200,704; w 128*64 = 8,192;
  //   y 128*28*28 = 100,352; total 309,248 floats = 1,236,992 bytes.
  CHECK(conv_bytes(resnet18_convs(1)[7].shape) == 1236992.0);
}

TEST_CASE("bench adam table: ResNet-18's parameters are torchvision's 11,689,512") {
  const auto shapes = resnet18_parameter_shapes();
  // conv1 + bn1 (3) + layer1 4 x (conv + bn) (12) + layers 2-4 each 5 x (conv + bn) (45)
  // + fc (2) = 62 tensors.
  CHECK(shapes.size() == 62);
  int64_t total = 0;
  for (const auto& s : shapes) total += numel(s);
  // 9,408 + 128 (stem) + 147,968 (layer1) + 525,568 (layer2) + 2,099,712 (layer3)
  // + 8,393,728 (layer4) + 513,000 (fc) = 11,689,512 (docs/architecture.md).
  CHECK(total == 11689512);
  CHECK(shapes.front() == std::vector<int64_t>{64, 3, 7, 7});
  CHECK(shapes.back() == std::vector<int64_t>{1000});
}

TEST_CASE("bench stats: median, percentiles, min and max of timings") {
  // Odd count: the middle value of the sorted list {1, 2, 5}.
  CHECK(percentile({5.0, 1.0, 2.0}, 0.5) == 2.0);
  // Even count: halfway between the two middle values of {1, 2, 3, 4}: 2.5.
  CHECK(percentile({4.0, 1.0, 3.0, 2.0}, 0.5) == 2.5);
  // q = 0.25 over {10, 20, 30, 40, 50}: position 1 -> 20; q = 0.9: position 3.6 -> 40 + 0.6*10.
  CHECK(percentile({50.0, 10.0, 40.0, 20.0, 30.0}, 0.25) == 20.0);
  CHECK(percentile({50.0, 10.0, 40.0, 20.0, 30.0}, 0.9) == Approx(46.0));
  CHECK(percentile({7.0}, 0.5) == 7.0);
  CHECK_THROWS(percentile({}, 0.5));

  const Stats s = summarize({3.0, 9.0, 1.0, 4.0, 2.0});
  CHECK(s.median == 3.0);
  CHECK(s.min == 1.0);
  CHECK(s.max == 9.0);
  // geomean(1, 4, 16) = (64)^(1/3) = 4.
  CHECK(geomean({1.0, 4.0, 16.0}) == Approx(4.0));
}

TEST_CASE("bench rotation: enough buffer copies to cover twice the L2") {
  const double l2 = 50e6;
  CHECK(rotation_sets(270e6, l2) == 1);  // the PGD batch: far beyond L2
  CHECK(rotation_sets(100e6, l2) == 1);  // exactly 2 L2
  CHECK(rotation_sets(31e6, l2) == 4);   // ceil(100 / 31) = 4
  CHECK(rotation_sets(1e6, l2) == 8);    // capped
  CHECK(rotation_sets(1e6, l2, 3) == 3);
}

TEST_CASE("bench options: defaults pass and bad values are usage errors") {
  Options o;
  CHECK_NOTHROW(validate_options(o));
  Options bad = o;
  bad.repeats = 0;
  CHECK_THROWS_AS(validate_options(bad), dml::UsageError);
  bad = o;
  bad.warmup = 0;  // the first launch chooses cuDNN's algorithms: never timed
  CHECK_THROWS_AS(validate_options(bad), dml::UsageError);
  bad = o;
  bad.batch = 111;  // odd: no two equal BN routes
  CHECK_THROWS_AS(validate_options(bad), dml::UsageError);
  bad = o;
  bad.batch = 0;
  CHECK_THROWS_AS(validate_options(bad), dml::UsageError);
  bad = o;
  bad.filter = "no such workload";
  CHECK_THROWS_WITH(validate_options(bad), Catch::Contains("matches no workload"));
  bad = o;
  bad.json_path = "";
  CHECK_THROWS_AS(validate_options(bad), dml::UsageError);

  Options filtered = o;
  filtered.filter = "wgrad";
  CHECK_NOTHROW(validate_options(filtered));
  int wgrads = 0;
  for (const std::string& name : workload_names(112)) wgrads += matches_filter(name, "wgrad");
  CHECK(wgrads == 28);  // ResNet-18's 20, C2F2's 2, and C2F2's 2 at each of 3 tile widths
  // 60 ResNet-18 conv passes + 7 C2F2 ones (conv2's dgrad twice) + 15 C2F2 tile rows (fprop and
  // wgrad of both layers, dgrad of conv2 only, at 128, 64, 32 columns) + 4 BN + PGD + Adam + 2
  // GEMM shapes x (strict + wmma, mma, wgmma, wgmma-overlap).
  CHECK(workload_names(112).size() == 98);
  int tile_rows = 0;
  for (const std::string& name : workload_names(112)) tile_rows += matches_filter(name, " tile");
  CHECK(tile_rows == 15);
  const std::vector<std::string> names = workload_names(112);
  CHECK(std::count(names.begin(), names.end(), "conv c2f2.conv2 dgrad tile32") == 1);
  CHECK(std::count(names.begin(), names.end(), "conv c2f2.conv1 wgrad tile64") == 1);
  CHECK(std::count(names.begin(), names.end(), "conv c2f2.conv1 dgrad tile32") == 0);
  CHECK(std::count(names.begin(), names.end(), "gemm 4096 wgmma") == 1);
  int gemm_4096_rows = 0;  // the strict row and one per tensor-core kernel
  for (const std::string& name : names) gemm_4096_rows += matches_filter(name, "gemm 4096");
  CHECK(gemm_4096_rows == 5);
}

TEST_CASE("bench gemm kernels: strict FP32 alone, the tensor-core kernels per mode") {
  using engine::kernels::Precision;
  CHECK(gemm_kernel_names(Precision::Fp32) == std::vector<std::string>{""});
  const std::vector<std::string> tensor_core{"wmma", "mma", "wgmma", "wgmma-overlap"};
  CHECK(gemm_kernel_names(Precision::Tf32) == tensor_core);
  CHECK(gemm_kernel_names(Precision::Bf16) == tensor_core);
}

TEST_CASE("bench conv table: C2F2's two convolutions at the Fashion-MNIST configs' batch") {
  // models/c2f2.h: conv1 1 -> 32 and conv2 32 -> 64, 5x5 pad 2, on 28x28 and (after a 2x2 pool)
  // 14x14; 128 SPC-2 pairs = 256 images.
  const std::vector<ConvLayer> convs = c2f2_convs();
  REQUIRE(convs.size() == 2);
  CHECK(convs[0].name == "c2f2.conv1");
  CHECK(convs[1].name == "c2f2.conv2");
  const auto& conv1 = convs[0].shape;
  const auto& conv2 = convs[1].shape;
  CHECK((conv1.N == 256 && conv1.C == 1 && conv1.K == 32 && conv1.R == 5 && conv1.pad_h == 2));
  CHECK((conv1.out_h() == 28 && conv1.out_w() == 28));
  CHECK((conv2.N == 256 && conv2.C == 32 && conv2.K == 64 && conv2.H == 14));
  CHECK((conv2.out_h() == 14 && conv2.out_w() == 14));
  // 2 N K P Q C R S by hand: 2 * 256 * 32 * 784 * 1 * 25 and 2 * 256 * 64 * 196 * 32 * 25.
  CHECK(conv_flops(conv1) == 321126400.0);
  CHECK(conv_flops(conv2) == 5138022400.0);
}

TEST_CASE("bench rows: rates, ratio and JSON") {
  Row r;
  r.workload = "gemm 4096";
  r.ours = Stats{2.0, 1.9, 2.5};
  r.peer = "cuBLAS";
  r.peer_ms = Stats{1.0, 0.9, 1.1};
  r.measure = Measure::Flops;
  r.work = 4e12;       // 4e12 FLOP in 2 ms = 2000 TFLOP/s
  r.ceiling = 4000.0;  // -> 50%
  CHECK(achieved_rate(r) == Approx(2000.0));
  CHECK(*peer_ratio(r) == Approx(0.5));  // the peer takes half our time
  CHECK(*ceiling_fraction(r) == Approx(0.5));

  const nlohmann::json j = row_json(r);
  CHECK(j["workload"] == "gemm 4096");
  CHECK(j["ours_ms"]["median"] == 2.0);
  CHECK(j["ours_ms"]["min"] == 1.9);
  CHECK(j["ours_ms"]["max"] == 2.5);
  CHECK(j["peer"] == "cuBLAS");
  CHECK(j["peer_ms"]["median"] == 1.0);
  CHECK(j["ratio_peer_over_ours"].get<double>() == Approx(0.5));
  CHECK(j["unit"] == "TFLOP/s");
  CHECK(j["flops"] == 4e12);
  CHECK(j["achieved"].get<double>() == Approx(2000.0));
  CHECK(j["ceiling_fraction"].get<double>() == Approx(0.5));
  CHECK_FALSE(j.contains("note"));
  CHECK_FALSE(j.contains("floor_ms"));

  // Floors: 26.4 GFLOP and 0.5 GB at 50 TFLOP/s and 2500 GB/s -> max(0.528, 0.2) ms = 0.528 ms;
  // 1.44 GFLOP and 0.5 GB -> max(0.0288, 0.2) = 0.2 ms (memory-bound).
  CHECK(floor_ms(26.4e9, 0.5e9, 50.0, 2500.0) == Approx(0.528));
  CHECK(floor_ms(1.44e9, 0.5e9, 50.0, 2500.0) == Approx(0.2));
  r.bytes = 1e9;
  r.floor_ms = 1.0;  // our median is 2 ms: half the floor's speed
  const nlohmann::json with_floor = row_json(r);
  CHECK(with_floor["bytes"] == 1e9);
  CHECK(with_floor["floor_ms"] == 1.0);
  CHECK(with_floor["floor_fraction"].get<double>() == Approx(0.5));

  const std::string line = format_row(r);
  CHECK(line.find("gemm 4096") == 0);
  CHECK(line.find("0.50x") != std::string::npos);
  CHECK(line.find("2000.00 TFLOP/s") != std::string::npos);
  CHECK(line.find("50.0%") != std::string::npos);
}

TEST_CASE("bench rows: a row without a peer writes nulls") {
  Row r;
  r.workload = "adam resnet18";
  r.ours = Stats{0.5, 0.4, 0.6};
  r.measure = Measure::Bytes;
  r.work = 1e9;     // 1e9 B in 0.5 ms = 2000 GB/s
  r.ceiling = 0.0;  // unknown
  r.note = "62 tensors";
  const nlohmann::json j = row_json(r);
  CHECK(j["peer"].is_null());
  CHECK(j["peer_ms"].is_null());
  CHECK(j["ratio_peer_over_ours"].is_null());
  CHECK(j["ceiling_fraction"].is_null());
  CHECK(j["unit"] == "GB/s");
  CHECK(j["bytes"] == 1e9);
  CHECK(j["achieved"].get<double>() == Approx(2000.0));
  CHECK(j["note"] == "62 tensors");
  const std::string line = format_row(r);
  CHECK(line.find("2000 GB/s") != std::string::npos);
  CHECK(line.find("(62 tensors)") != std::string::npos);
}

// ---- dml bench --train's instruments (tools/dml/bench_instruments.h) ----------------------------

namespace {

ProfiledLaunch launch(const std::string& name, double ms, double flops = -1.0, double bytes = -1.0,
                      bool library = false) {
  ProfiledLaunch l;
  l.name = name;
  l.label = name + " shape";
  l.ms = ms;
  l.flops = flops;
  l.bytes = bytes;
  l.library = library;
  return l;
}

}  // namespace

TEST_CASE("bench instruments: a launch's floor is the larger of its FLOP and byte floors") {
  const FloorRates rates{"test", 50.0, 4000.0};
  // 2e9 FLOP at 50 TFLOP/s = 0.04 ms; 4e6 B at 4000 GB/s = 0.001 ms: the FLOPs bind.
  CHECK(*launch_floor_ms(launch("conv", 0.1, 2e9, 4e6), rates) == Approx(0.04));
  // 8e6 B at 4000 GB/s = 0.002 ms; no FLOP count: the bytes alone.
  CHECK(*launch_floor_ms(launch("pgd_step", 0.01, -1.0, 8e6), rates) == Approx(0.002));
  CHECK_FALSE(launch_floor_ms(launch("fill", 0.01), rates).has_value());
  // The H200's rates as measured on 2026-11-27 unless the device is an H100.
  CHECK(floor_rates_for("NVIDIA H200").tflops == 51.3);
  CHECK(floor_rates_for("NVIDIA H200").gbps == 4253.0);
  CHECK(floor_rates_for("NVIDIA H100 80GB HBM3").tflops == 66.9);
  CHECK(floor_rates_for("NVIDIA H100 80GB HBM3").gbps == 3000.0);
}

TEST_CASE("bench instruments: the profiled attack pass ends with its pgd_step launch") {
  // clean forward, pass 1 (2 launches + pgd_step), pass 2 (a GEMM call, a kernel, pgd_step), rest.
  const std::vector<ProfiledLaunch> step = {
      launch("conv2d_fprop", 1.0), launch("unary", 1.0),
      launch("pgd_step", 1.0),     launch("cublasSgemm", 1.0, 2e6, 1e3, true),
      launch("unary", 1.0),        launch("pgd_step", 1.0),
      launch("conv2d_wgrad", 1.0)};
  const PassRange pass = attack_pass(step);
  CHECK(pass.begin == 3);
  CHECK(pass.end == 6);
  CHECK(pass.number == 2);
  CHECK(pass.passes == 2);
  CHECK(kernel_launches_in(step, pass.begin, pass.end) == 2);  // the library call is not one

  const std::vector<ProfiledLaunch> one_pass(step.begin(), step.begin() + 3);
  const PassRange first = attack_pass(one_pass);
  CHECK((first.begin == 0 && first.end == 3 && first.number == 1 && first.passes == 1));
  const std::vector<ProfiledLaunch> vanilla = {launch("conv2d_fprop", 1.0), launch("unary", 1.0)};
  const PassRange whole = attack_pass(vanilla);
  CHECK((whole.begin == 0 && whole.end == 2 && whole.number == 0 && whole.passes == 0));
}

TEST_CASE("bench instruments: counts per step, per pass and the GPU-busy fraction") {
  DeviceCounters a, b;
  a.kernel_launches = 100;
  a.library_calls = 3;
  a.workspace_allocations = 2;
  b.kernel_launches = 102;
  b.library_calls = 3;
  b.device_allocations = 1;
  const std::vector<ProfiledLaunch> profile = {launch("unary", 0.5), launch("pgd_step", 0.25),
                                               launch("unary", 0.5), launch("unary", 0.25),
                                               launch("pgd_step", 0.5)};
  // Kernel time 2.0 ms over a 8 ms median step: 25 % busy; pass 2 = launches 3..5 = 3 kernels.
  const Instruments s = summarize_instruments({a, b}, profile, 8.0);
  CHECK(s.launches_min == 100);
  CHECK(s.launches_max == 102);
  CHECK(launch_range(s) == "100-102");
  const InstrumentColumns columns = instrument_columns(s);
  CHECK(columns.launches == "100-102");
  CHECK(columns.allocs == "1");
  CHECK(columns.busy == "25.0%");
  CHECK(s.library_calls_max == 3);
  CHECK(s.allocations_max == 1);
  CHECK(s.workspace_allocations_max == 2);
  CHECK(*s.launches_per_pass == 3);
  CHECK(*s.kernel_ms == Approx(2.0));
  CHECK(*s.busy_fraction == Approx(0.25));
  CHECK(format_instruments(s) ==
        "kernels launched per step: 100-102 (+ 3 cuBLAS/cuDNN calls); per attack pass: 3\n"
        "device allocations per step after warm-up: 1 cudaMalloc, 2 stream-ordered workspaces "
        "(cudaMallocAsync)\n"
        "GPU busy: 25.0% of a step (2.000 ms of kernel time in the profiled step over the median "
        "step)\n");
  const nlohmann::json j = instruments_json(s);
  CHECK(j["kernel_launches_per_step"]["min"] == 100);
  CHECK(j["kernel_launches_per_attack_pass"] == 3);
  CHECK(j["device_allocations_per_step"] == 1);
  CHECK(j["gpu_busy_fraction"].get<double>() == Approx(0.25));

  // Without a profiled step (the CPU): no per-pass count, no busy fraction.
  const Instruments cpu = summarize_instruments({a}, {}, 8.0);
  CHECK(launch_range(cpu) == "100");
  CHECK_FALSE(cpu.launches_per_pass.has_value());
  CHECK(instruments_json(cpu)["gpu_busy_fraction"].is_null());
}

TEST_CASE("bench instruments: the profile prints one row per launch with its floor") {
  const FloorRates rates{"test rates", 50.0, 4000.0};
  // conv: 2e9 FLOP, 4e6 B in 0.1 ms: floor 0.04 ms = 40 %. pgd_step: 8e6 B in 0.004 ms: floor
  // 0.002 ms = 50 %. fill: nothing known.
  std::vector<ProfiledLaunch> step = {launch("conv2d_fprop", 0.1, 2e9, 4e6), launch("fill", 0.001),
                                      launch("pgd_step", 0.004, -1.0, 8e6)};
  step[1].after_idle = true;
  CHECK(format_profile_row(1, step[0], rates) ==
        "   1  conv2d_fprop                    0.1000      2.0000      4.000    0.0400    40.0%  "
        "conv2d_fprop shape");
  CHECK(format_profile_row(2, step[1], rates) ==
        "   2  fill                            0.0010*          -          -         -        -  "
        "fill shape");
  const std::string text = format_profile(step, attack_pass(step), rates);
  CHECK(text.find("profile of attack pass 1 of 1:\nfloors at test rates\n") == 0);
  CHECK(text.find("50.0%  pgd_step shape\n3 kernels, 0 library calls, 0.1050 ms\n* the GPU") !=
        std::string::npos);
  const nlohmann::json j = profile_json(step, attack_pass(step), rates);
  REQUIRE(j["launches"].size() == 3);
  CHECK(j["launches"][0]["flops"] == 2e9);
  CHECK(j["launches"][0]["floor_fraction"].get<double>() == Approx(0.4));
  CHECK(j["launches"][1]["flops"].is_null());
  CHECK(j["launches"][1]["floor_ms"].is_null());
  CHECK(j["floor_rates"]["fp32_tflops"] == 50.0);
}

TEST_CASE("bench precision modes: all four by default, a list in order, bad lists refused") {
  using engine::kernels::Precision;
  const std::vector<PrecisionMode> all = precision_modes();
  REQUIRE(all.size() == 4);
  CHECK(all_precision_mode_names() == "fp32,pytorch-default,tf32,bf16");
  CHECK(Options().modes.size() == 4);  // the default: every mode
  // PyTorch's defaults: cudnn.allow_tf32 = True, cuda.matmul.allow_tf32 = False.
  CHECK(all[1].name == "pytorch-default");
  CHECK(all[1].gemm == Precision::Fp32);
  CHECK(all[1].conv == Precision::Tf32);
  CHECK((all[0].gemm == Precision::Fp32 && all[0].conv == Precision::Fp32));
  CHECK((all[2].gemm == Precision::Tf32 && all[2].conv == Precision::Tf32));
  CHECK((all[3].gemm == Precision::Bf16 && all[3].conv == Precision::Bf16));

  const std::vector<PrecisionMode> chosen = parse_precision_modes("tf32,fp32");
  REQUIRE(chosen.size() == 2);
  CHECK(chosen[0].name == "tf32");
  CHECK(chosen[1].name == "fp32");
  CHECK(parse_precision_modes("pytorch-default").size() == 1);
  CHECK_THROWS_WITH(parse_precision_modes("fp16"),
                    Catch::Contains("--precision-modes: unknown mode 'fp16'") &&
                        Catch::Contains("fp32,pytorch-default,tf32,bf16"));
  CHECK_THROWS_AS(parse_precision_modes(""), dml::UsageError);
  CHECK_THROWS_AS(parse_precision_modes("fp32,"), dml::UsageError);
  CHECK_THROWS_WITH(parse_precision_modes("fp32,tf32,fp32"), Catch::Contains("'fp32' given twice"));
  CHECK(format_mode_header(all[2]) ==
        "== precision mode tf32: TF32 GEMMs and convolutions; peers cuBLAS and cuDNN in the same "
        "mode");
}

TEST_CASE("bench rows: the mode and both errors in the table and the JSON; a missing kernel") {
  Row r;
  r.workload = "gemm 4096";
  r.precision = "tf32";
  r.ours = Stats{2.0, 1.9, 2.5};
  r.peer = "cuBLAS";
  r.peer_ms = Stats{1.0, 0.9, 1.1};
  r.measure = Measure::Flops;
  r.work = 4e12;
  r.ours_error = 1.5e-4;
  r.peer_error = 2.5e-7;
  CHECK(format_header().find("ours err") != std::string::npos);
  CHECK(format_header().find("peer err") != std::string::npos);
  const std::string line = format_row(r);
  CHECK(line.find("1.5e-04") != std::string::npos);
  CHECK(line.find("2.5e-07") != std::string::npos);
  const nlohmann::json j = row_json(r);
  CHECK(j["precision"] == "tf32");
  CHECK(j["ours_max_rel_error"] == 1.5e-4);
  CHECK(j["peer_max_rel_error"] == 2.5e-7);
  r.peer_error.reset();  // e.g. no BF16 cuBLAS yet
  CHECK(row_json(r)["peer_max_rel_error"].is_null());
  CHECK(format_row(r).find(" - ") != std::string::npos);

  Row missing;
  missing.workload = "gemm 4096";
  missing.precision = "bf16";
  missing.not_implemented = "bf16 is not implemented yet";
  CHECK(format_row(missing) == "gemm 4096: not implemented (bf16 is not implemented yet)");
  const nlohmann::json m = row_json(missing);
  CHECK(m["precision"] == "bf16");
  CHECK(m["not_implemented"] == "bf16 is not implemented yet");
  CHECK_FALSE(m.contains("ours_ms"));

  Row precision_free;  // bn, pgd, adam: no mode, no error keys
  precision_free.workload = "pgd step";
  precision_free.ours = Stats{1.0, 1.0, 1.0};
  CHECK_FALSE(row_json(precision_free).contains("precision"));
}

TEST_CASE("bench accuracy: sampled positions and relative errors, by hand") {
  CHECK(sample_positions(10, 4) == std::vector<int64_t>{0, 2, 5, 7});  // i 10 / 4, floored
  CHECK(sample_positions(3, 256) == std::vector<int64_t>{0, 1, 2});    // fewer outputs: all
  // A = [1 -2; 3 4], B = [5 6; 7 -8]: C[1][1] = 3 6 + 4 (-8) = -14, terms' magnitudes 18 + 32.
  const float a[] = {1, -2, 3, 4}, b[] = {5, 6, 7, -8};
  const Reference c11 = gemm_reference(2, 2, a, b, 3);
  CHECK(c11.value == -14.0);
  CHECK(c11.magnitude == 50.0);
  CHECK(relative_error(-14.5, c11) == 0.01);  // 0.5 / 50
  CHECK(relative_error(0.0, Reference{}) == 0.0);
  CHECK(std::isinf(relative_error(1.0, Reference{})));
  // C[0][1] = 1 6 + (-2)(-8) = 22.
  CHECK(gemm_reference(2, 2, a, b, 1).value == 22.0);
}

TEST_CASE("bench accuracy: sampled_errors takes the worst sample of each side, by hand") {
  // C = A B with A = [1 -2; 3 4], B = [5 6; 7 -8]: C = [-9 22; 43 -14], the terms' magnitudes
  // 19, 22, 43, 50. Ours is off by 0.1875 at C[0][0] (0.1875 / 19 < 0.01) and by 0.5 at C[1][1]
  // (0.5 / 50 = 0.01, the worst); the peer by 2 at C[0][1] (2 / 22).
  const float a[] = {1, -2, 3, 4}, b[] = {5, 6, 7, -8};
  auto reference = [&](int64_t index) { return gemm_reference(2, 2, a, b, index); };
  const std::vector<float> ours = {-9.0f + 0.1875f, 22.0f, 43.0f, -14.5f};
  const std::vector<float> peer = {-9.0f, 20.0f, 43.0f, -14.0f};
  const SampledErrors both = sampled_errors(ours, peer, reference);
  CHECK(both.ours == 0.01);
  REQUIRE(both.peer.has_value());
  CHECK(*both.peer == Approx(2.0 / 22.0).epsilon(1e-15));
  // No peer output (it was skipped): no peer figure; exact outputs: 0.
  const SampledErrors alone = sampled_errors(peer, {}, reference);
  CHECK(alone.ours == Approx(2.0 / 22.0).epsilon(1e-15));
  CHECK_FALSE(alone.peer.has_value());
  CHECK(sampled_errors({-9.0f, 22.0f, 43.0f, -14.0f}, {}, reference).ours == 0.0);
}

TEST_CASE("bench accuracy: conv references by hand and against the plain-loop CPU convolution") {
  engine::kernels::Conv2dShape hand;  // x 1x1x3x3 = 1..9, w 1x1x2x2 = [1 0; 0 -1], no padding
  hand.N = hand.C = hand.K = 1;
  hand.H = hand.W = 3;
  hand.R = hand.S = 2;
  const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[] = {1, 0, 0, -1};
  // y[0][1] = x[0][1] - x[1][2] = 2 - 6; magnitude 2 + 6.
  const Reference y01 = conv_fprop_reference(hand, x, w, 1);
  CHECK(y01.value == -4.0);
  CHECK(y01.magnitude == 8.0);
  // dx[1][1] with dy = 1..4 (2x2): taps (p, q) = (1, 1) r = s = 0 -> dy[1][1] 1; (0, 0) r = s = 1
  // -> dy[0][0] (-1): 4 - 1 = 3.
  const float dy[] = {1, 2, 3, 4};
  CHECK(conv_dgrad_reference(hand, dy, w, 4).value == 3.0);
  // dw[1][1] = sum over p, q of dy[p][q] x[p + 1][q + 1] = 1 5 + 2 6 + 3 8 + 4 9 = 77.
  CHECK(conv_wgrad_reference(hand, dy, x, 3).value == 77.0);

  // Every output of a strided, padded, dilated shape against conv2d_*_cpu<double>.
  engine::kernels::Conv2dShape s;
  s.N = 2;
  s.C = 3;
  s.H = 7;
  s.W = 6;
  s.K = 4;
  s.R = 3;
  s.S = 2;
  s.stride_h = 2;
  s.pad_h = 1;
  s.pad_w = 2;
  s.dilation_w = 2;
  const int64_t P = s.out_h(), Q = s.out_w();
  const int64_t x_n = s.N * s.C * s.H * s.W, w_n = s.K * s.C * s.R * s.S, y_n = s.N * s.K * P * Q;
  auto values = [](int64_t n, int seed) {
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(float((i * 7 + seed) % 11) - 5.0f);
    return v;
  };
  const std::vector<float> xf = values(x_n, 1), wf = values(w_n, 2), dyf = values(y_n, 3);
  const std::vector<double> xd(xf.begin(), xf.end()), wd(wf.begin(), wf.end()),
      dyd(dyf.begin(), dyf.end());
  std::vector<double> y(static_cast<size_t>(y_n)), dx(static_cast<size_t>(x_n)),
      dw(static_cast<size_t>(w_n));
  engine::kernels::conv2d_fprop_cpu<double>(s, xd.data(), wd.data(), nullptr, y.data());
  engine::kernels::conv2d_dgrad_cpu<double>(s, dyd.data(), wd.data(), dx.data());
  engine::kernels::conv2d_wgrad_cpu<double>(s, dyd.data(), xd.data(), dw.data(), nullptr);
  for (int64_t i = 0; i < y_n; ++i) {
    REQUIRE(conv_fprop_reference(s, xf.data(), wf.data(), i).value == y[size_t(i)]);
  }
  for (int64_t i = 0; i < x_n; ++i) {
    REQUIRE(conv_dgrad_reference(s, dyf.data(), wf.data(), i).value == dx[size_t(i)]);
  }
  for (int64_t i = 0; i < w_n; ++i) {
    REQUIRE(conv_wgrad_reference(s, dyf.data(), xf.data(), i).value == dw[size_t(i)]);
  }
}
