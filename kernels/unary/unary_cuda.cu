// unary, CUDA: elementwise functions of one f32 tensor and their backward (math and the table
// of derivatives: unary.h; every formula below is the CPU reference's, in float).
//
// Layout:   contiguous arrays of n elements. The backward reads only what its formula needs:
//           x (relu, log, pow, abs, clamp) or y (exp, sqrt); the other pointer may be null.
// Parallel: one thread per element, grid-stride loop, 256 threads per block. The op is a
//           kernel argument: the switch is uniform across the grid (no divergence) and the
//           compiler hoists it out of the loop.
// Cost:     forward n evaluations of f (1 FLOP, or one expf/logf/sqrtf/powf), reads 4n bytes and
//           writes 4n; backward reads 8n, writes 4n. Memory bound: floor 8n (forward) or 12n
//           (backward) bytes / DRAM bandwidth.
#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/unary/unary.h"

namespace engine::kernels {
namespace {

constexpr int kThreads = 256;

__device__ inline float sign_of(float v) { return static_cast<float>((v > 0.0f) - (v < 0.0f)); }

__device__ inline float forward_one(UnaryOp op, float v, float s, float lo, float hi) {
  switch (op) {
    case UnaryOp::AddScalar:
      return v + s;
    case UnaryOp::MulScalar:
      return v * s;
    case UnaryOp::Neg:
      return -v;
    case UnaryOp::Relu:
      return v < 0.0f ? 0.0f : v;  // NaN < 0 is false: NaN passes through
    case UnaryOp::Exp:
      return expf(v);
    case UnaryOp::Log:
      return logf(v);
    case UnaryOp::Sqrt:
      return sqrtf(v);
    case UnaryOp::Pow:
      return powf(v, s);
    case UnaryOp::Abs:
      return fabsf(v);
    case UnaryOp::Sign:
      return isnan(v) ? v : sign_of(v);
    case UnaryOp::Clamp:
      return v < lo ? lo : (hi < v ? hi : v);  // NaN fails both tests: passes through
  }
  return 0.0f;
}

// dx for one element; x_i / y_i are read only by the ops whose formula uses them.
__device__ inline float backward_one(UnaryOp op, const float* x, const float* y, int64_t i, float g,
                                     float s, float lo, float hi) {
  switch (op) {
    case UnaryOp::AddScalar:
      return g;
    case UnaryOp::MulScalar:
      return s * g;
    case UnaryOp::Neg:
      return -g;
    case UnaryOp::Relu:
      return x[i] > 0.0f ? g : 0.0f;
    case UnaryOp::Exp:
      return g * y[i];
    case UnaryOp::Log:
      return g / x[i];
    case UnaryOp::Sqrt:
      return g * 0.5f / y[i];
    case UnaryOp::Pow:
      // x^0 is constant; p x^(p-1) would give 0 * inf = NaN at x = 0.
      return s == 0.0f ? 0.0f : g * s * powf(x[i], s - 1.0f);
    case UnaryOp::Abs:
      return g * sign_of(x[i]);
    case UnaryOp::Sign:
      return 0.0f;
    case UnaryOp::Clamp:
      return (lo <= x[i] && x[i] <= hi) ? g : 0.0f;
  }
  return 0.0f;
}

__global__ void unary_kernel(UnaryOp op, const float* x, int64_t n, float s, float lo, float hi,
                             float* y) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    y[i] = forward_one(op, x[i], s, lo, hi);
  }
}

__global__ void unary_backward_kernel(UnaryOp op, const float* x, const float* y,
                                      const float* grad_y, int64_t n, float s, float lo, float hi,
                                      float* grad_x) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    grad_x[i] = backward_one(op, x, y, i, grad_y[i], s, lo, hi);
  }
}

}  // namespace

// The scalars are rounded to float once on the host, exactly as unary_cpu<float> does.
void unary_cuda(UnaryOp op, const float* x, int64_t n, UnaryParams params, float* y) {
  if (n == 0) return;
  describe_next_launch({"unary", -1.0, 8.0 * double(n)});  // x read, y written
  unary_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      op, x, n, static_cast<float>(params.scalar), static_cast<float>(params.low),
      static_cast<float>(params.high), y);
  CUDA_CHECK_LAUNCH("unary_cuda op=", static_cast<int>(op), " n=", n);
}

void unary_backward_cuda(UnaryOp op, const float* x, const float* y, const float* grad_y, int64_t n,
                         UnaryParams params, float* grad_x) {
  if (n == 0) return;
  ENGINE_CHECK(!unary_backward_reads_x(op) || x != nullptr,
               "unary_backward_cuda op=", static_cast<int>(op),
               ": this op's derivative reads x, which is null");
  ENGINE_CHECK(!unary_backward_reads_y(op) || y != nullptr,
               "unary_backward_cuda op=", static_cast<int>(op),
               ": this op's derivative reads y, which is null");
  // grad_y and x or y read (two for some ops; counted once), grad_x written.
  describe_next_launch({"unary_backward", -1.0, 12.0 * double(n)});
  unary_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      op, x, y, grad_y, n, static_cast<float>(params.scalar), static_cast<float>(params.low),
      static_cast<float>(params.high), grad_x);
  CUDA_CHECK_LAUNCH("unary_backward_cuda op=", static_cast<int>(op), " n=", n);
}

}  // namespace engine::kernels
