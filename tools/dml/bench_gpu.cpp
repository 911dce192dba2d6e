// `dml bench` on the GPU: the timing loop, the ceilings and the workloads other than the
// convolution suite, which is bench_gpu_conv.cpp (contract in bench_gpu.h; counts and formatting
// in bench_table.h).
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

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/bench/timer.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_mma.h"
#include "kernels/matmul/matmul_wgmma.h"
#include "kernels/optim/optim.h"
#include "kernels/pgd_step/pgd_step.h"
#include "tools/dml/bench_accuracy.h"
#include "tools/dml/bench_device.h"

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
// matmul_cuda's split-K is for. In strict FP32 one row per shape (matmul_cuda); in a tensor-core
// mode one row per kernel that ENGINE_TC_GEMM can choose (gemm_kernel_names, bench_table.h), so
// one run compares them side by side against the same cuBLAS timing.

namespace {

// Our GEMM `kernel` ("" = strict FP32, else wmma, mma, wgmma or wgmma-overlap) in `precision`;
// throws where the
// kernel cannot run (wgmma off compute capability 9.0, with the reason).
void our_gemm(const std::string& kernel, k::Precision precision, int64_t m, int64_t n, int64_t kk,
              const float* a, const float* b, float* c) {
  if (kernel.empty()) {
    k::matmul_cuda(m, n, kk, a, b, false, false, c, false);
  } else if (kernel == "wmma") {
    k::matmul_tensor_core_cuda(m, n, kk, a, b, false, false, c, false, precision);
  } else if (kernel == "mma") {
    k::matmul_mma_cuda(m, n, kk, a, b, false, false, c, false, precision);
  } else if (kernel == "wgmma") {
    k::matmul_wgmma_cuda(m, n, kk, a, b, false, false, c, false, precision);
  } else {
    k::matmul_wgmma_cuda(m, n, kk, a, b, false, false, c, false, precision,
                         k::WgmmaPipeline::kOverlapped);
  }
}

}  // namespace

void bench_gemm(Context& ctx, const PrecisionMode& mode, std::vector<Row>& rows) {
  struct Shape {
    const char* name;
    int64_t m, n, k;
  };
  for (const Shape& s :
       {Shape{"gemm 4096", 4096, 4096, 4096}, Shape{"gemm 128x512x10000", 128, 512, 10000}}) {
    std::vector<std::string> kernels;
    for (const std::string& kernel : gemm_kernel_names(mode.gemm)) {
      const std::string name = kernel.empty() ? s.name : std::string(s.name) + " " + kernel;
      if (matches_filter(name, ctx.options.filter)) kernels.push_back(kernel);
    }
    if (kernels.empty()) continue;
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
    const Set& first = sets[0];
    const std::vector<float> a = host_copy(first.a), b = host_copy(first.b);
    auto reference = [&](int64_t index) {
      return gemm_reference(s.n, s.k, a.data(), b.data(), index);
    };

    // cuBLAS in this mode, timed once for every row of the shape.
    auto peer_once = [&](const Set& t) {
      k::matmul_cublas_precision(s.m, s.n, s.k, ptr(t.a), ptr(t.b), false, false, ptr(t.c), false,
                                 mode.gemm);
    };
    const std::string peer_missing = not_implemented_message([&] { peer_once(first); });
    std::optional<Stats> peer_ms;
    std::vector<float> peer_out;
    if (peer_missing.empty()) {
      peer_ms = time_launches(ctx.options, [&](int64_t i) { peer_once(sets[size_t(i % count)]); });
      peer_once(first);
      peer_out = host_copy(first.c);
    }

    for (const std::string& kernel : kernels) {
      Row row;
      row.workload = kernel.empty() ? s.name : std::string(s.name) + " " + kernel;
      row.precision = mode.name;
      row.measure = Measure::Flops;
      row.work = 2.0 * double(s.m) * double(s.n) * double(s.k);
      set_ceiling(row, ctx, mode.gemm);
      auto ours_once = [&](const Set& t) {
        our_gemm(kernel, mode.gemm, s.m, s.n, s.k, ptr(t.a), ptr(t.b), ptr(t.c));
      };
      if (kernel.compare(0, 5, "wgmma") == 0 && k::wgmma_unsupported_reason()[0] != '\0') {
        row.not_implemented = k::wgmma_unsupported_reason();  // this GPU or build has no wgmma
        rows.push_back(row);
        continue;
      }
      row.not_implemented = not_implemented_message([&] { ours_once(first); });
      if (!row.not_implemented.empty()) {
        rows.push_back(row);
        continue;
      }
      row.ours = time_launches(ctx.options, [&](int64_t i) { ours_once(sets[size_t(i % count)]); });
      ours_once(first);
      const std::vector<float> ours_out = host_copy(first.c);
      if (peer_ms) {
        row.peer = "cuBLAS";
        row.peer_ms = peer_ms;
      } else {
        row.note = "peer skipped: " + peer_missing;
      }
      const SampledErrors errors = sampled_errors(ours_out, peer_out, reference);
      row.ours_error = errors.ours;
      row.peer_error = errors.peer;
      const k::SplitK split = k::matmul_cuda_splits(s.m, s.n, s.k);
      if (kernel.empty() && split.splits > 1) {
        row.note = "ours: split-K, " + std::to_string(split.splits) + " chunks";
      }
      rows.push_back(row);
    }
  }
}

}  // namespace dml::bench
