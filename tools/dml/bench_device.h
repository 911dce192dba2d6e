// Helpers of `dml bench`'s GPU workloads (bench_gpu.cpp, bench_gpu_conv.cpp): device buffers
// filled from the context's generator, host copies for the error check, the "not implemented"
// probe and the strict-FP32 ceiling columns.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/common/check.h"
#include "kernels/common/precision.h"
#include "tools/dml/bench_gpu.h"

namespace dml::bench {

inline engine::Tensor device_uniform(Context& ctx, int64_t n, double low, double high) {
  return engine::uniform({n}, low, high, ctx.generator, engine::DType::F32, engine::Device::cuda());
}

inline engine::Tensor device_empty(int64_t n) {
  return engine::Tensor::empty({n}, engine::DType::F32, engine::Device::cuda());
}

inline float* ptr(const engine::Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// A host copy of a device buffer, for the error check.
inline std::vector<float> host_copy(const engine::Tensor& t) {
  const engine::Tensor cpu = t.to(engine::Device::cpu());
  return std::vector<float>(cpu.data<float>(), cpu.data<float>() + cpu.numel());
}

// Runs `launch` once: "" when it works, the message when it throws an engine::Error saying
// "not implemented" (a precision without a kernel or a library mode yet); other errors propagate.
inline std::string not_implemented_message(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const engine::Error& e) {
    if (std::string(e.what()).find("not implemented") == std::string::npos) throw;
    return e.what();
  }
  return "";
}

// The ceiling and floor columns exist in strict FP32 only: they are the FP32 SGEMM's rate, which
// a tensor-core mode may pass.
inline void set_ceiling(Row& row, const Context& ctx, engine::kernels::Precision precision) {
  if (precision != engine::kernels::Precision::Fp32) return;
  row.ceiling = ctx.ceilings.sgemm_tflops;
  if (row.bytes > 0.0) {
    row.floor_ms = floor_ms(row.work, row.bytes, ctx.ceilings.sgemm_tflops, ctx.ceilings.copy_gbps);
  }
}

}  // namespace dml::bench
