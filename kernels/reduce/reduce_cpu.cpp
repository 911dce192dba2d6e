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
  for_each_strided_offset(
      layout, [&](int64_t flat, int64_t src_offset) { dst[flat] = scale * src[src_offset]; });
}

ENGINE_INSTANTIATE_FLOATING(sum_axis_cpu);
ENGINE_INSTANTIATE_FLOATING(broadcast_cpu);

}  // namespace engine::kernels
