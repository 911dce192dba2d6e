// `dml bench` on the GPU: the timing loop, the ceilings and the workloads (contract in
// bench_gpu.h; counts and formatting in bench_table.h).
//
// Method (shared/research/performance-anchors.md §8): every input lives on the device, filled by
// engine::uniform (Philox on the GPU); each timed call sits between its own pair of CUDA events on
// the current stream; warm-up calls come first; the row reports the median of the timed calls
// (and min, max). When a workload's buffers fit in L2, it cycles through several copies of them
// (rotation_sets) so a call never finds its inputs cached by the previous one. Ours and the peer
// run the same shapes on the same buffers in the same process, in the same precision mode
// (bench_modes.h). The GEMM and convolution rows then run each side once more on the first set
// and compare sampled outputs with an f64 reference on the host (bench_accuracy.h).
#include "tools/dml/bench_gpu.h"

#include <string>
#include <utility>

#include "engine/device.h"
#include "engine/precision.h"
#include "engine/tensor.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/bench/timer.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/conv2d/conv2d.h"
#include "kernels/matmul/matmul.h"
#include "kernels/optim/optim.h"
#include "kernels/pgd_step/pgd_step.h"
#include "tools/dml/bench_accuracy.h"

namespace dml::bench {

namespace k = engine::kernels;
using engine::Tensor;

namespace {

// 2 x repeats events, destroyed even when a launch throws.
class EventPairs {
 public:
  explicit EventPairs(int64_t pairs) {
    for (int64_t i = 0; i < 2 * pairs; ++i) events_.push_back(k::cuda_event_create());
  }
  ~EventPairs() {
    for (void* event : events_) {
      try {
        k::cuda_event_destroy(event);
      } catch (...) {  // a destructor must not throw; the error was or will be reported elsewhere
      }
    }
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  void* start(int64_t i) const { return events_[2 * i]; }
  void* stop(int64_t i) const { return events_[2 * i + 1]; }

 private:
  std::vector<void*> events_;
};

Tensor device_uniform(Context& ctx, int64_t n, double low, double high) {
  return engine::uniform({n}, low, high, ctx.generator, engine::DType::F32, engine::Device::cuda());
}

Tensor device_empty(int64_t n) {
  return Tensor::empty({n}, engine::DType::F32, engine::Device::cuda());
}

float* ptr(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// A host copy of a device buffer, for the error check.
std::vector<float> host_copy(const Tensor& t) {
  const Tensor cpu = t.to(engine::Device::cpu());
  return std::vector<float>(cpu.data<float>(), cpu.data<float>() + cpu.numel());
}

// Runs `launch` once: "" when it works, the message when it throws an engine::Error saying
// "not implemented" (a precision without a kernel or a library mode yet); other errors propagate.
std::string not_implemented_message(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const engine::Error& e) {
    if (std::string(e.what()).find("not implemented") == std::string::npos) throw;
    return e.what();
  }
  return "";
}

// The largest relative error (bench_accuracy.h) of `got` at the sampled positions.
double max_error(const std::vector<float>& got, const std::vector<int64_t>& positions,
                 const std::vector<Reference>& references) {
  double worst = 0.0;
  for (size_t i = 0; i < positions.size(); ++i) {
    worst = std::max(worst, relative_error(got[size_t(positions[i])], references[i]));
  }
  return worst;
}

// The ceiling and floor columns exist in strict FP32 only: they are the FP32 SGEMM's rate, which
// a tensor-core mode may pass.
void set_ceiling(Row& row, const Context& ctx, k::Precision precision) {
  if (precision != k::Precision::Fp32) return;
  row.ceiling = ctx.ceilings.sgemm_tflops;
  if (row.bytes > 0.0) {
    row.floor_ms = floor_ms(row.work, row.bytes, ctx.ceilings.sgemm_tflops, ctx.ceilings.copy_gbps);
  }
}

// Sums of per-row statistics: the time of running all rows once, back to back.
void add_to(Stats& total, const Stats& s) {
  total.median += s.median;
  total.min += s.min;
  total.max += s.max;
}

}  // namespace

Stats time_launches(const Options& options, const std::function<void(int64_t)>& launch) {
  int64_t call = 0;
  for (; call < options.warmup; ++call) launch(call);
  EventPairs events(options.repeats);
  for (int64_t r = 0; r < options.repeats; ++r, ++call) {
    k::cuda_event_record(events.start(r));
    launch(call);
    k::cuda_event_record(events.stop(r));
  }
  std::vector<double> ms;
  for (int64_t r = 0; r < options.repeats; ++r) {
    ms.push_back(k::cuda_event_elapsed_ms(events.start(r), events.stop(r)));
  }
  return summarize(ms);
}

void measure_ceilings(Context& ctx) {
  Ceilings& c = ctx.ceilings;
  {
    // 1 GiB each way: far beyond any L2, long enough (~0.5 ms) that event resolution is moot.
    const int64_t n = int64_t(1) << 28;
    Tensor src = device_uniform(ctx, n, -1.0, 1.0);
    Tensor dst = device_empty(n);
    const size_t bytes = size_t(n) * sizeof(float);
    c.copy_bytes = 2.0 * double(bytes);  // read + write
    c.copy_ms = time_launches(
        ctx.options, [&](int64_t) { k::cuda_memcpy_device_to_device(ptr(dst), ptr(src), bytes); });
    c.copy_gbps = c.copy_bytes / (c.copy_ms.median * 1e-3) / 1e9;
  }
  {
    c.sgemm_size = 8192;
    const int64_t s = c.sgemm_size;
    Tensor a = device_uniform(ctx, s * s, -1.0, 1.0);
    Tensor b = device_uniform(ctx, s * s, -1.0, 1.0);
    Tensor out = device_empty(s * s);
    c.sgemm_ms = time_launches(ctx.options, [&](int64_t) {
      k::matmul_cublas(s, s, s, ptr(a), ptr(b), false, false, ptr(out), false);
    });
    c.sgemm_tflops = 2.0 * double(s) * double(s) * double(s) / (c.sgemm_ms.median * 1e-3) / 1e12;
  }
}

// ---- (1) ResNet-18 convolutions, ours vs cuDNN -------------------------------------------------

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

// The precision our convolution kernels run in when a mode asks for `precision`: TF32 on our
// tensor-core convolutions (conv2d_tensor_core_cuda.cu); strict FP32 under bf16, which has no
// convolution kernel yet, as in the engine (engine/precision.h).
k::Precision our_conv_precision(k::Precision precision) {
  return precision == k::Precision::Tf32 ? k::Precision::Tf32 : k::Precision::Fp32;
}

// One call of our kernel for `pass` on buffers a, b -> out (see bench_conv_pass), in `precision`
// (our_conv_precision's): the tile-width rule for strict FP32, the tensor-core kernels for TF32.
void run_our_conv(const k::Conv2dShape& s, Pass pass, const float* a, const float* b, float* out,
                  float* workspace, k::ConvTile tile, k::Precision precision) {
  const bool tensor_cores = precision != k::Precision::Fp32;
  switch (pass) {
    case Pass::Fprop:
      if (tensor_cores) {
        k::conv2d_fprop_tensor_core_cuda(s, a, b, nullptr, out, precision);
      } else {
        k::conv2d_fprop_cuda(s, a, b, nullptr, out, tile);
      }
      break;
    case Pass::Dgrad:
      if (tensor_cores) {
        k::conv2d_dgrad_tensor_core_cuda(s, a, b, out, precision);
      } else {
        k::conv2d_dgrad_cuda(s, a, b, out, tile);
      }
      break;
    case Pass::Wgrad:
      if (tensor_cores) {
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

// The f64 references of the sampled outputs of `pass` on host inputs a, b (bench_accuracy.h).
std::vector<Reference> conv_references(const k::Conv2dShape& s, Pass pass,
                                       const std::vector<float>& a, const std::vector<float>& b,
                                       const std::vector<int64_t>& positions) {
  std::vector<Reference> references;
  for (int64_t index : positions) {
    if (pass == Pass::Fprop) {
      references.push_back(conv_fprop_reference(s, a.data(), b.data(), index));
    } else if (pass == Pass::Wgrad) {
      references.push_back(conv_wgrad_reference(s, a.data(), b.data(), index));
    } else {
      references.push_back(conv_dgrad_reference(s, a.data(), b.data(), index));
    }
  }
  return references;
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
  const k::Precision ours_precision = our_conv_precision(mode.conv);
  Tensor workspace;
  if (pass == Pass::Wgrad) {
    const int64_t ws = ours_precision == k::Precision::Fp32
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
  std::string ours_note;
  if (ours_precision != mode.conv) {
    ours_note = std::string("ours: strict FP32 (no ") + engine::precision_name(mode.conv) +
                " convolution kernel yet); ";
  }
  if (!cudnn) {
    row.note = ours_note + "built without cuDNN: peer skipped";
  } else {
    const std::string missing = not_implemented_message(
        [&] { run_cudnn_conv(s, pass, ptr(first.a), ptr(first.b), ptr(first.out), mode.conv); });
    if (!missing.empty()) {
      row.note = ours_note + "peer skipped: " + missing;
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
      row.note = ours_note + "cuDNN algorithms " + k::conv2d_cudnn_algorithms(s, mode.conv);
    }
  }
  if (measure_error) {
    const std::vector<int64_t> positions =
        sample_positions(int64_t(ours_out.size()), kErrorSamples);
    const std::vector<Reference> references =
        conv_references(s, pass, host_copy(first.a), host_copy(first.b), positions);
    row.ours_error = max_error(ours_out, positions, references);
    if (!peer_out.empty()) row.peer_error = max_error(peer_out, positions, references);
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
      if (pass == Pass::DgradDirect && layer.shape.C <= 4) continue;  // its dgrad row is that
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
      if (pass == Pass::Dgrad && layer.shape.C <= 4) continue;
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

// ---- (2) multi-branch batch norm, train forward and backward ------------------------------------

void bench_batch_norm(Context& ctx, std::vector<Row>& rows) {
  // layer1's activation: [batch, 64, 56, 56].
  const int64_t n = ctx.options.batch, c = 64, hw = 56 * 56;
  const int64_t elements = n * c * hw;
  for (int branches : {1, 2}) {
    const std::string prefix = "bn K=" + std::to_string(branches) + " ";
    const std::string fwd_name = prefix + "forward-train", bwd_name = prefix + "backward";
    const bool fwd = matches_filter(fwd_name, ctx.options.filter);
    const bool bwd = matches_filter(bwd_name, ctx.options.filter);
    if (!fwd && !bwd) continue;

    k::BatchNormShape shape;
    shape.N = n;
    shape.C = c;
    shape.HW = hw;
    shape.K = branches;
    shape.num_routes = branches;  // K = 2: clean rows [0, n/2) -> 0, adversarial [n/2, n) -> 1
    for (int r = 0; r < branches; ++r) {
      shape.route_begin[r] = n * r / branches;
      shape.route_end[r] = n * (r + 1) / branches;
      shape.route_branch[r] = r;
    }
    const int64_t kc = branches * c;
    Tensor weight = device_uniform(ctx, kc, 0.5, 1.5), bias = device_uniform(ctx, kc, -0.5, 0.5);
    Tensor running_mean = Tensor::zeros({kc}, engine::DType::F32, engine::Device::cuda());
    Tensor running_var = Tensor::ones({kc}, engine::DType::F32, engine::Device::cuda());
    Tensor dweight = device_empty(kc), dbias = device_empty(kc);
    struct Set {
      Tensor x, y, dy, dx, save_mean, save_invstd;
    };
    std::vector<Set> sets;
    const int count =
        rotation_sets(kBnForwardBytesPerElement * double(elements), double(ctx.l2_bytes));
    for (int i = 0; i < count; ++i) {
      sets.push_back({device_uniform(ctx, elements, -2.0, 2.0), device_empty(elements),
                      device_uniform(ctx, elements, -1.0, 1.0), device_empty(elements),
                      device_empty(kc), device_empty(kc)});
    }
    auto forward = [&](int64_t i) {
      const Set& t = sets[size_t(i % count)];
      k::batch_norm_forward_train_cuda(shape, ptr(t.x), ptr(weight), ptr(bias), 0.1f, 1e-5f,
                                       ptr(t.y), ptr(t.save_mean), ptr(t.save_invstd),
                                       ptr(running_mean), ptr(running_var));
    };
    // The backward reads the statistics its forward saved: run each set's forward once first.
    for (int i = 0; i < count; ++i) forward(i);
    const std::string routes = branches == 1 ? "1 route" : "2 routes of n/2 rows";
    if (fwd) {
      Row row;
      row.workload = fwd_name;
      row.ours = time_launches(ctx.options, forward);
      row.measure = Measure::Bytes;
      row.work = kBnForwardBytesPerElement * double(elements);
      row.ceiling = ctx.ceilings.copy_gbps;
      row.note = routes + "; bytes: read x + write y";
      rows.push_back(row);
    }
    if (bwd) {
      Row row;
      row.workload = bwd_name;
      row.ours = time_launches(ctx.options, [&](int64_t i) {
        const Set& t = sets[size_t(i % count)];
        k::batch_norm_backward_cuda(shape, true, ptr(t.dy), ptr(t.x), ptr(weight), ptr(t.save_mean),
                                    ptr(t.save_invstd), ptr(t.dx), ptr(dweight), ptr(dbias));
      });
      row.measure = Measure::Bytes;
      row.work = kBnBackwardBytesPerElement * double(elements);
      row.ceiling = ctx.ceilings.copy_gbps;
      row.note = routes + "; bytes: read dy, x + write dx";
      rows.push_back(row);
    }
  }
}

// ---- (3) the fused PGD step vs a copy of the image batch --------------------------------------

void bench_pgd_step(Context& ctx, std::vector<Row>& rows) {
  const std::string name = "pgd step";
  if (!matches_filter(name, ctx.options.filter)) return;
  const int64_t n = ctx.options.batch * 3 * 224 * 224;
  struct Set {
    Tensor x, x0, g, x_new, copy;
  };
  std::vector<Set> sets;
  const int count = rotation_sets(kPgdBytesPerElement * double(n), double(ctx.l2_bytes));
  for (int i = 0; i < count; ++i) {
    sets.push_back({device_uniform(ctx, n, 0.0, 1.0), device_uniform(ctx, n, 0.0, 1.0),
                    device_uniform(ctx, n, -1.0, 1.0), device_empty(n), device_empty(n)});
  }
  Tensor max_delta = device_empty(1);
  const float alpha = 3.0f / 255.0f, eps = 8.0f / 255.0f;  // the rob224 profile
  Row row;
  row.workload = name;
  row.ours = time_launches(ctx.options, [&](int64_t i) {
    const Set& t = sets[size_t(i % count)];
    k::pgd_step_cuda(n, ptr(t.x), ptr(t.x0), ptr(t.g), alpha, eps, ptr(t.x_new), ptr(max_delta));
  });
  row.peer = "D2D copy";
  row.peer_ms = time_launches(ctx.options, [&](int64_t i) {
    const Set& t = sets[size_t(i % count)];
    k::cuda_memcpy_device_to_device(ptr(t.copy), ptr(t.x), size_t(n) * sizeof(float));
  });
  row.measure = Measure::Bytes;
  row.work = kPgdBytesPerElement * double(n);
  row.ceiling = ctx.ceilings.copy_gbps;
  row.note = "step moves 16n B, the copy 8n B: 0.50x = copy speed";
  rows.push_back(row);
}

// ---- (4) Adam over ResNet-18's parameters ------------------------------------------------------

void bench_adam(Context& ctx, std::vector<Row>& rows) {
  const std::string name = "adam resnet18";
  if (!matches_filter(name, ctx.options.filter)) return;
  const std::vector<std::vector<int64_t>> shapes = resnet18_parameter_shapes();
  // One flat buffer per state, each tensor starting on a 256-byte boundary as the caching
  // allocator would place separate tensors (so vectorized paths see realistic alignment).
  std::vector<int64_t> offsets;
  int64_t padded = 0, params = 0;
  for (const std::vector<int64_t>& shape : shapes) {
    offsets.push_back(padded);
    params += numel(shape);
    padded += (numel(shape) + 63) / 64 * 64;
  }
  Tensor p = device_uniform(ctx, padded, -0.1, 0.1), g = device_uniform(ctx, padded, -0.01, 0.01);
  Tensor m = device_uniform(ctx, padded, -1e-3, 1e-3), v = device_uniform(ctx, padded, 0.0, 1e-4);
  std::vector<k::AdamTensorRef> refs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    k::AdamTensorRef ref;
    ref.param = ptr(p) + offsets[i];
    ref.grad = ptr(g) + offsets[i];
    ref.exp_avg = ptr(m) + offsets[i];
    ref.exp_avg_sq = ptr(v) + offsets[i];
    ref.n = numel(shapes[i]);
    ref.step = 10;
    refs.push_back(ref);
  }
  k::AdamHyper hyper;
  hyper.weight_decay = 1e-4;  // coupled (L2), as robrank's Adam
  Row row;
  row.workload = name;
  row.ours = time_launches(ctx.options, [&](int64_t) {
    k::adam_update_multi_cuda(refs.data(), int64_t(refs.size()), hyper);
  });
  row.measure = Measure::Bytes;
  row.work = kAdamBytesPerParam * double(params);
  row.ceiling = ctx.ceilings.copy_gbps;
  row.note =
      std::to_string(shapes.size()) + " tensors, " + std::to_string(params) + " params, 28 B each";
  rows.push_back(row);
}

// ---- (5) SGEMM, ours vs cuBLAS: 4096^3, and an attack's skinny backward -----------------------
// "gemm 128x512x10000" is dQ = dD X in an attack step's backward through its gallery distances
// (128 queries, D = 512, the 10,000-image Fashion-MNIST gallery): 4 output tiles, the shape
// matmul_cuda's split-K is for.

void bench_gemm(Context& ctx, const PrecisionMode& mode, std::vector<Row>& rows) {
  struct Shape {
    const char* name;
    int64_t m, n, k;
  };
  for (const Shape& s :
       {Shape{"gemm 4096", 4096, 4096, 4096}, Shape{"gemm 128x512x10000", 128, 512, 10000}}) {
    if (!matches_filter(s.name, ctx.options.filter)) continue;
    struct Set {
      Tensor a, b, c;
    };
    std::vector<Set> sets;
    const double bytes = 4.0 * double(s.m * s.k + s.k * s.n + s.m * s.n);
    const int count = rotation_sets(bytes, double(ctx.l2_bytes));
    for (int i = 0; i < count; ++i) {
      sets.push_back({device_uniform(ctx, s.m * s.k, -1.0, 1.0),
                      device_uniform(ctx, s.k * s.n, -1.0, 1.0), device_empty(s.m * s.n)});
    }
    Row row;
    row.workload = s.name;
    row.precision = mode.name;
    row.measure = Measure::Flops;
    row.work = 2.0 * double(s.m) * double(s.n) * double(s.k);
    set_ceiling(row, ctx, mode.gemm);
    // Ours as the engine runs a GEMM in this precision (engine/ops/matmul.cpp).
    auto ours_once = [&](const Set& t) {
      if (mode.gemm == k::Precision::Fp32) {
        k::matmul_cuda(s.m, s.n, s.k, ptr(t.a), ptr(t.b), false, false, ptr(t.c), false);
      } else {
        k::matmul_tensor_core_cuda(s.m, s.n, s.k, ptr(t.a), ptr(t.b), false, false, ptr(t.c), false,
                                   mode.gemm);
      }
    };
    auto peer_once = [&](const Set& t) {
      k::matmul_cublas_precision(s.m, s.n, s.k, ptr(t.a), ptr(t.b), false, false, ptr(t.c), false,
                                 mode.gemm);
    };
    const Set& first = sets[0];
    row.not_implemented = not_implemented_message([&] { ours_once(first); });
    if (!row.not_implemented.empty()) {
      rows.push_back(row);
      continue;
    }
    row.ours = time_launches(ctx.options, [&](int64_t i) { ours_once(sets[size_t(i % count)]); });
    ours_once(first);
    const std::vector<float> ours_out = host_copy(first.c);
    const std::string peer_missing = not_implemented_message([&] { peer_once(first); });
    std::vector<float> peer_out;
    if (peer_missing.empty()) {
      row.peer = "cuBLAS";
      row.peer_ms =
          time_launches(ctx.options, [&](int64_t i) { peer_once(sets[size_t(i % count)]); });
      peer_once(first);
      peer_out = host_copy(first.c);
    } else {
      row.note = "peer skipped: " + peer_missing;
    }
    const std::vector<float> a = host_copy(first.a), b = host_copy(first.b);
    const std::vector<int64_t> positions = sample_positions(s.m * s.n, kErrorSamples);
    std::vector<Reference> references;
    for (int64_t index : positions) {
      references.push_back(gemm_reference(s.n, s.k, a.data(), b.data(), index));
    }
    row.ours_error = max_error(ours_out, positions, references);
    if (!peer_out.empty()) row.peer_error = max_error(peer_out, positions, references);
    const k::SplitK split = k::matmul_cuda_splits(s.m, s.n, s.k);
    if (mode.gemm == k::Precision::Fp32 && split.splits > 1) {
      row.note = "ours: split-K, " + std::to_string(split.splits) + " chunks";
    }
    rows.push_back(row);
  }
}

}  // namespace dml::bench
