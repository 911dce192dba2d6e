// fill, CPU reference: out[i] = value.
#include "kernels/fill/fill.h"

namespace engine::kernels {

template <typename T>
void fill_cpu(T* out, int64_t n, T value) {
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

template void fill_cpu<float>(float*, int64_t, float);
template void fill_cpu<double>(double*, int64_t, double);
template void fill_cpu<int64_t>(int64_t*, int64_t, int64_t);

}  // namespace engine::kernels
