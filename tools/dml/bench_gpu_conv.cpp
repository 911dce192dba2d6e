// `dml bench` on the GPU, the convolution suite: the 20 ResNet-18 convolutions and C2F2's, each
// pass ours against cuDNN in the row's precision mode, with both sides' sampled errors, and C2F2's
// passes once per tile width (contract in bench_gpu.h; method in bench_gpu.cpp's header).
#include <cstdio>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/conv2d/conv2d_mma.h"
#include "tools/dml/bench_accuracy.h"
#include "tools/dml/bench_device.h"
#include "tools/dml/bench_gpu.h"

namespace dml::bench {

namespace k = engine::kernels;
using engine::Tensor;

namespace {

// DgradDirect: dgrad through conv2d_dgrad_direct_cuda (the per-pixel kernel that
// conv2d_dgrad_cuda takes only for C <= 4), timed where the GEMM is the default, to decide.
enum class Pass { Fprop, Dgrad, Wgrad, DgradDirect };
const char* pass_name(Pass p) {
  switch (p) {
    case Pass::Fprop:
      return "fprop";
    case Pass::Dgrad:
      return "dgrad";
    case Pass::Wgrad:
      return "wgrad";
    case Pass::DgradDirect:
      return "dgrad-direct";
  }
  return "?";
}

// The pass as the tile rule names it (DgradDirect has no tile; it is never asked).
k::ConvPass kernel_pass(Pass p) {
  if (p == Pass::Fprop) return k::ConvPass::Fprop;
  return p == Pass::Wgrad ? k::ConvPass::Wgrad : k::ConvPass::Dgrad;
}

// Whether our TF32 and BF16 convolutions run on mma.sync (ENGINE_TC_CONV=mma) rather than WMMA.
bool our_conv_on_mma(k::Precision precision) {
  return precision != k::Precision::Fp32 &&
         engine::tensor_core_conv() == engine::TensorCoreConv::Mma;
}

// One call of our kernel for `pass` on buffers a, b -> out (see bench_conv_pass), in `precision`
// (the mode's): the tile-width rule for strict FP32, the tensor-core kernels for TF32 and BF16
// (on mma.sync under ENGINE_TC_CONV=mma, as engine/ops/conv2d.cpp runs them).
void run_our_conv(const k::Conv2dShape& s, Pass pass, const float* a, const float* b, float* out,
                  float* workspace, k::ConvTile tile, k::Precision precision) {
  const bool tensor_cores = precision != k::Precision::Fp32;
  const bool mma = our_conv_on_mma(precision);
  switch (pass) {
    case Pass::Fprop:
      if (mma) {
        k::conv2d_fprop_mma_cuda(s, a, b, nullptr, out, precision);
      } else if (tensor_cores) {
        k::conv2d_fprop_tensor_core_cuda(s, a, b, nullptr, out, precision);
      } else {
        k::conv2d_fprop_cuda(s, a, b, nullptr, out, tile);
      }
      break;
    case Pass::Dgrad:
      if (mma) {
        k::conv2d_dgrad_mma_cuda(s, a, b, out, precision);
      } else if (tensor_cores) {
        k::conv2d_dgrad_tensor_core_cuda(s, a, b, out, precision);
      } else {
        k::conv2d_dgrad_cuda(s, a, b, out, tile);
      }
      break;
    case Pass::Wgrad:
      if (mma) {
        k::conv2d_wgrad_mma_cuda(s, a, b, out, nullptr, workspace, precision);
      } else if (tensor_cores) {
        k::conv2d_wgrad_tensor_core_cuda(s, a, b, out, nullptr, workspace, precision);
      } else {
        k::conv2d_wgrad_cuda(s, a, b, out, nullptr, workspace, tile);
      }
      break;
    case Pass::DgradDirect:
      k::conv2d_dgrad_direct_cuda(s, a, b, out);
      break;
  }
}

void run_cudnn_conv(const k::Conv2dShape& s, Pass pass, const float* a, const float* b, float* out,
                    k::Precision precision) {
  switch (pass) {
    case Pass::Fprop:
      k::conv2d_fprop_cudnn(s, a, b, nullptr, out, precision);
      break;
    case Pass::Dgrad:
    case Pass::DgradDirect:
      k::conv2d_dgrad_cudnn(s, a, b, out, precision);
      break;
    case Pass::Wgrad:
      k::conv2d_wgrad_cudnn(s, a, b, out, nullptr, precision);
      break;
  }
}

// The f64 reference of output `index` of `pass` on host inputs a, b (bench_accuracy.h).
Reference conv_reference(const k::Conv2dShape& s, Pass pass, const std::vector<float>& a,
                         const std::vector<float>& b, int64_t index) {
  if (pass == Pass::Fprop) return conv_fprop_reference(s, a.data(), b.data(), index);
  if (pass == Pass::Wgrad) return conv_wgrad_reference(s, a.data(), b.data(), index);
  return conv_dgrad_reference(s, a.data(), b.data(), index);
}

// Sums of per-row statistics: the time of running all rows once, back to back.
void add_to(Stats& total, const Stats& s) {
  total.median += s.median;
  total.min += s.min;
  total.max += s.max;
}

// `tile`: our kernels' tile width (Auto: the rule's pick, as training runs them). `mode`: the
// precision of both sides; with `measure_error`, the row gets both sides' errors.
Row bench_conv_pass(Context& ctx, const k::Conv2dShape& s, Pass pass, const std::string& name,
                    bool cudnn, const PrecisionMode& mode, bool measure_error,
                    k::ConvTile tile = k::ConvTile::Auto) {
  const int64_t x_n = s.N * s.C * s.H * s.W;
  const int64_t w_n = s.K * s.C * s.R * s.S;
  const int64_t y_n = s.N * s.K * s.out_h() * s.out_w();
  // Per pass: two inputs and one output. fprop: x, w -> y; dgrad: dy, w -> dx; wgrad: dy, x -> dw.
  const int64_t a_n = pass == Pass::Fprop ? x_n : y_n;
  const int64_t b_n = pass == Pass::Wgrad ? x_n : w_n;
  const int64_t out_n = pass == Pass::Fprop ? y_n : pass == Pass::Wgrad ? w_n : x_n;
  struct Set {
    Tensor a, b, out;
  };
  std::vector<Set> sets;
  const int count = rotation_sets(conv_bytes(s), double(ctx.l2_bytes));
  for (int i = 0; i < count; ++i) {
    sets.push_back({device_uniform(ctx, a_n, -1.0, 1.0), device_uniform(ctx, b_n, -1.0, 1.0),
                    device_empty(out_n)});
  }
  // Our wgrad's split-reduction scratch: shared by the sets (it is overwritten by every call).
  const k::Precision ours_precision = mode.conv;
  Tensor workspace;
  if (pass == Pass::Wgrad) {
    const int64_t ws = our_conv_on_mma(ours_precision) ? k::conv2d_wgrad_mma_cuda_workspace_size(s)
                       : ours_precision == k::Precision::Fp32
                           ? k::conv2d_wgrad_cuda_workspace_size(s, tile)
                           : k::conv2d_wgrad_tensor_core_cuda_workspace_size(s, ours_precision);
    if (ws > 0) workspace = device_empty(ws);
  }

  Row row;
  row.workload = name;
  row.precision = mode.name;
  row.measure = Measure::Flops;
  row.work = conv_flops(s);
  row.bytes = conv_bytes(s);
  set_ceiling(row, ctx, mode.conv);
  const Set& first = sets[0];
  auto ours_once = [&](const Set& t) {
    run_our_conv(s, pass, ptr(t.a), ptr(t.b), ptr(t.out), ptr(workspace), tile, ours_precision);
  };
  row.ours = time_launches(ctx.options, [&](int64_t i) { ours_once(sets[size_t(i % count)]); });
  std::vector<float> ours_out, peer_out;
  if (measure_error) {
    ours_once(first);
    ours_out = host_copy(first.out);
  }
  if (!cudnn) {
    row.note = "built without cuDNN: peer skipped";
  } else {
    const std::string missing = not_implemented_message(
        [&] { run_cudnn_conv(s, pass, ptr(first.a), ptr(first.b), ptr(first.out), mode.conv); });
    if (!missing.empty()) {
      row.note = "peer skipped: " + missing;
    } else {
      row.peer = "cuDNN";
      row.peer_ms = time_launches(ctx.options, [&](int64_t i) {
        const Set& t = sets[size_t(i % count)];
        run_cudnn_conv(s, pass, ptr(t.a), ptr(t.b), ptr(t.out), mode.conv);
      });
      if (measure_error) {
        run_cudnn_conv(s, pass, ptr(first.a), ptr(first.b), ptr(first.out), mode.conv);
        peer_out = host_copy(first.out);
      }
      row.note = "cuDNN algorithms " + k::conv2d_cudnn_algorithms(s, mode.conv);
      // cuDNN's BF16 configuration writes y in BF16 (conv2d_cudnn.cu): its error includes that.
      if (mode.conv == k::Precision::Bf16) row.note += "; cuDNN output rounded to BF16";
    }
  }
  if (measure_error) {
    const std::vector<float> a = host_copy(first.a), b = host_copy(first.b);
    const SampledErrors errors = sampled_errors(
        ours_out, peer_out, [&](int64_t index) { return conv_reference(s, pass, a, b, index); });
    row.ours_error = errors.ours;
    row.peer_error = errors.peer;
  }
  return row;
}

}  // namespace

void bench_convs(Context& ctx, const PrecisionMode& mode, std::vector<Row>& rows) {
  const std::vector<ConvLayer> convs = resnet18_convs(ctx.options.batch);
  const bool cudnn = k::cudnn_available();
  // The peer at its best, as PyTorch with cudnn.benchmark = True: each pass's algorithm is the
  // fastest strict-FP32 one cuDNN measures (in the warm-up launches), deterministic or not.
  if (cudnn) k::set_cudnn_algorithm_choice(k::CudnnAlgorithmChoice::Fastest);
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
    Row total;
    total.workload = std::string("conv total ") + pass_name(pass) + " (20 layers)";
    total.precision = mode.name;
    total.measure = Measure::Flops;
    set_ceiling(total, ctx, mode.conv);
    Stats peer_total;
    std::vector<double> ratios;
    size_t timed = 0;
    for (const ConvLayer& layer : convs) {
      const std::string name = "conv " + layer.name + " " + pass_name(pass);
      if (!matches_filter(name, ctx.options.filter)) continue;
      rows.push_back(bench_conv_pass(ctx, layer.shape, pass, name, cudnn, mode, true));
      const Row& r = rows.back();
      ++timed;
      total.work += r.work;
      total.bytes += r.bytes;
      total.floor_ms += r.floor_ms;  // the layers run one after another
      add_to(total.ours, r.ours);
      if (r.peer_ms) {
        add_to(peer_total, *r.peer_ms);
        ratios.push_back(*peer_ratio(r));
      }
    }
    if (timed != convs.size()) continue;  // a total only over the whole network
    if (ratios.size() == timed) {         // every layer had its peer
      total.peer = "cuDNN";
      total.peer_ms = peer_total;
      char note[96];
      std::snprintf(note, sizeof note, "sum of the 20 rows; geomean peer/ours %.2fx",
                    geomean(ratios));
      total.note = note;
    } else {
      total.note = "sum of the 20 rows";
    }
    rows.push_back(total);
  }
  // C2F2's rows, and its conv2's dgrad (C = 32) once more through the direct kernel.
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad, Pass::DgradDirect}) {
    for (const ConvLayer& layer : c2f2_convs()) {
      if (pass == Pass::DgradDirect && k::dgrad_is_first_layer(layer.shape))
        continue;  // its dgrad row is that
      const std::string name = "conv " + layer.name + " " + pass_name(pass);
      if (matches_filter(name, ctx.options.filter)) {
        rows.push_back(bench_conv_pass(ctx, layer.shape, pass, name, cudnn, mode, true));
      }
    }
  }
  // C2F2's passes once per tile width (the rows above run the rule's pick), ours only: the
  // cuDNN time is in the row without "tile". dgrad of conv1 (C = 1) has no tile (direct kernel).
  // Strict FP32 only: they compare our tiles with each other, not with a peer.
  if (mode.conv != k::Precision::Fp32) return;
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
    for (const ConvLayer& layer : c2f2_convs()) {
      if (pass == Pass::Dgrad && k::dgrad_is_first_layer(layer.shape)) continue;
      for (k::ConvTile tile : conv_tile_widths()) {
        const std::string name = "conv " + layer.name + " " + pass_name(pass) + " tile" +
                                 std::to_string(k::conv2d_tile_columns(tile));
        if (!matches_filter(name, ctx.options.filter)) continue;
        rows.push_back(bench_conv_pass(ctx, layer.shape, pass, name, false, mode, false, tile));
        const k::ConvTile pick =
            k::conv2d_pick_tile(kernel_pass(pass), layer.shape, k::cuda_multiprocessor_count());
        rows.back().note = std::string("ours only; the rule picks ") +
                           std::to_string(k::conv2d_tile_columns(pick)) + " columns here";
      }
    }
  }
}

}  // namespace dml::bench
