// The GPU half of `dml bench` (bench_gpu.cpp; the convolution suite in bench_gpu_conv.cpp): the
// timing loop, the two ceilings and the five workload families of issue 3. The pure helpers
// (tables, counts, statistics, formatting) are in bench_table.h; the command itself (options,
// output) in bench.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/random.h"
#include "tools/dml/bench_table.h"

namespace dml::bench {

// Times launch(i) on the current stream: options.warmup untimed calls (cuDNN plan selection,
// cuBLAS handle creation, instruction-cache and TLB warm-up happen there), then options.repeats
// calls, each between its own pair of CUDA events. `i` counts all calls from 0, so a workload
// rotates its buffers with i % sets.
Stats time_launches(const Options& options, const std::function<void(int64_t)>& launch);

struct Ceilings {
  double copy_bytes = 0.0;  // bytes read + written by one copy
  Stats copy_ms;
  double copy_gbps = 0.0;
  int64_t sgemm_size = 0;  // m = n = k
  Stats sgemm_ms;
  double sgemm_tflops = 0.0;
};

// What every workload needs: the options, the L2 size for rotation, the ceilings, and one seeded
// generator for the device-side uniform fills.
struct Context {
  Options options;
  int64_t l2_bytes = 0;
  Ceilings ceilings;
  engine::Generator generator{20261121};
};

// Fills ctx.ceilings. Bandwidth: a 1 GiB cudaMemcpyAsync device-to-device (2 GiB moved). FLOP
// rate: cuBLAS SGEMM 8192^3 (strict FP32, the precision class of our kernels and the cuDNN peer).
void measure_ceilings(Context& ctx);

// Each appends the rows whose workload name matches options.filter; bench_convs and bench_gemm
// in one precision mode (bench_modes.h), ours and the peer alike, with their errors against the
// sampled f64 reference (bench_accuracy.h).
void bench_convs(Context& ctx, const PrecisionMode& mode, std::vector<Row>& rows);
void bench_batch_norm(Context& ctx, std::vector<Row>& rows);
void bench_pgd_step(Context& ctx, std::vector<Row>& rows);
void bench_adam(Context& ctx, std::vector<Row>& rows);
void bench_gemm(Context& ctx, const PrecisionMode& mode, std::vector<Row>& rows);

}  // namespace dml::bench
