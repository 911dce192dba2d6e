// concat, CUDA, f32 and i64 (math and layout: concat.h).
//
// Math:     the output is `outer` blocks of W = sum_i width_i elements; block o is block o of
//           input 0, then block o of input 1, ... So element (o, e) of input i (e < width_i) goes
//           to out[o * W + prefix_i + e], prefix_i = width_0 + ... + width_{i-1}.
// Layout:   all buffers contiguous. `inputs` and `widths` are host arrays (the device pointers
//           of the inputs and their block widths); nothing but the data lives on the device.
// Parallel: one launch per input (their pointers are known on the host, so no pointer table
//           has to be copied to the device), each a grid-stride loop with one thread per element
//           of that input: f in [0, outer * width_i) -> o = f / width_i, e = f % width_i. Reads
//           are fully coalesced; writes are coalesced within each block row.
// Cost:     no FLOPs; every element read once and written once: 8 bytes per f32 element (16 per
//           i64). Floor: bytes / bandwidth, plus one launch (~3 us) per input.
#include <cstdint>

#include "kernels/common/cuda_check.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/concat/concat.h"

namespace engine::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void concat_one_kernel(const T* input, int64_t width, int64_t outer, int64_t total_width,
                                  int64_t prefix, T* out) {
  for (int64_t f = grid_thread_index(); f < outer * width; f += grid_thread_count()) {
    const int64_t o = f / width, e = f % width;
    out[o * total_width + prefix + e] = input[f];
  }
}

template <typename T>
void concat_launch(int64_t count, const T* const* inputs, const int64_t* widths, int64_t outer,
                   T* out) {
  int64_t total_width = 0;
  for (int64_t i = 0; i < count; ++i) total_width += widths[i];
  int64_t prefix = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t elements = outer * widths[i];
    if (elements > 0) {
      concat_one_kernel<T><<<grid_for(elements, kThreads), kThreads, 0, current_stream()>>>(
          inputs[i], widths[i], outer, total_width, prefix, out);
      CUDA_CHECK_LAUNCH("concat_cuda input ", i, " of ", count, ": outer=", outer,
                        " width=", widths[i], " (total width ", total_width, ")");
    }
    prefix += widths[i];
  }
}

}  // namespace

void concat_cuda(int64_t count, const float* const* inputs, const int64_t* widths, int64_t outer,
                 float* out) {
  concat_launch<float>(count, inputs, widths, outer, out);
}

void concat_cuda(int64_t count, const int64_t* const* inputs, const int64_t* widths, int64_t outer,
                 int64_t* out) {
  concat_launch<int64_t>(count, inputs, widths, outer, out);
}

}  // namespace engine::kernels
