// concat, CPU reference (math and layout in concat.h): plain loops, block by block.
#include "kernels/common/instantiate.h"
#include "kernels/concat/concat.h"

namespace engine::kernels {

template <typename T>
void concat_cpu(int64_t count, const T* const* inputs, const int64_t* widths, int64_t outer,
                T* out) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i) {
      const T* block = inputs[i] + o * widths[i];
      for (int64_t e = 0; e < widths[i]; ++e) *out++ = block[e];
    }
  }
}

ENGINE_INSTANTIATE_FLOATING(concat_cpu);
ENGINE_INSTANTIATE(concat_cpu, int64_t);

}  // namespace engine::kernels
