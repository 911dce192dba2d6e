// reduce, CPU reference: sum along the middle axis of [outer, reduce, inner], and broadcast.
// Plain single-threaded loops (math, layout and cost: reduce.h).
#include "kernels/common/instantiate.h"
#include "kernels/reduce/reduce.h"

namespace engine::kernels {

template <typename T>
void sum_axis_cpu(const T* x, int64_t outer, int64_t reduce, int64_t inner, T scale, T* out) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double acc = 0.0;
      for (int64_t r = 0; r < reduce; ++r) acc += x[(o * reduce + r) * inner + i];
      out[o * inner + i] = static_cast<T>(static_cast<double>(scale) * acc);
    }
  }
}

template <typename T>
void broadcast_cpu(const T* src, StridedLayout layout, T scale, T* dst) {
  int64_t total = 1;
  for (int d = 0; d < layout.ndim; ++d) total *= layout.shape[d];
  int64_t index[kMaxDims] = {};
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t src_offset = 0;
    for (int d = 0; d < layout.ndim; ++d) src_offset += index[d] * layout.strides[d];
    dst[flat] = scale * src[src_offset];
    // Advance the multi-index in row-major order (last dimension fastest).
    for (int d = layout.ndim - 1; d >= 0; --d) {
      if (++index[d] < layout.shape[d]) break;
      index[d] = 0;
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(sum_axis_cpu);
ENGINE_INSTANTIATE_FLOATING(broadcast_cpu);

}  // namespace engine::kernels
