// copy_strided and convert, CPU reference.
#include "kernels/common/instantiate.h"
#include "kernels/copy/copy.h"

namespace engine::kernels {

template <typename T>
void copy_strided_cpu(const T* src, StridedLayout layout, T* dst) {
  for_each_strided_offset(layout,
                          [&](int64_t flat, int64_t src_offset) { dst[flat] = src[src_offset]; });
}

template <typename T>
void copy_into_strided_cpu(const T* src, T* dst, StridedLayout layout) {
  for_each_strided_offset(layout,
                          [&](int64_t flat, int64_t dst_offset) { dst[dst_offset] = src[flat]; });
}

template <typename From, typename To>
void convert_cpu(const From* src, int64_t n, To* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i]);
}

ENGINE_INSTANTIATE_FLOATING(copy_strided_cpu);
ENGINE_INSTANTIATE(copy_strided_cpu, int64_t);
ENGINE_INSTANTIATE_FLOATING(copy_into_strided_cpu);
ENGINE_INSTANTIATE(copy_into_strided_cpu, int64_t);
ENGINE_INSTANTIATE(convert_cpu, float, double);
ENGINE_INSTANTIATE(convert_cpu, double, float);
ENGINE_INSTANTIATE(convert_cpu, int64_t, double);
ENGINE_INSTANTIATE(convert_cpu, int64_t, float);
ENGINE_INSTANTIATE(convert_cpu, double, int64_t);
ENGINE_INSTANTIATE(convert_cpu, float, int64_t);

}  // namespace engine::kernels
