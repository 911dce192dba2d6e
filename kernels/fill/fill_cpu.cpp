// fill, CPU reference: out[i] = value.
#include "kernels/common/instantiate.h"
#include "kernels/fill/fill.h"

namespace engine::kernels {

template <typename T>
void fill_cpu(int64_t n, T value, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

ENGINE_INSTANTIATE_FLOATING(fill_cpu);
ENGINE_INSTANTIATE(fill_cpu, int64_t);

}  // namespace engine::kernels
