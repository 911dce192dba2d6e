// index_select, CPU reference (math and layout in index_select.h): plain loops over rows.
#include "kernels/common/instantiate.h"
#include "kernels/index_select/index_select.h"

#include "kernels/common/check.h"

namespace engine::kernels {

template <typename T>
void index_select_forward_cpu(const T* x, int64_t rows, int64_t row_size, const int64_t* index,
                              int64_t count, T* out) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = index[i];
    ENGINE_CHECK(row >= 0 && row < rows, "index_select: index ", row, " (at position ", i,
                 ") is out of range for dimension 0 of size ", rows);
    for (int64_t e = 0; e < row_size; ++e) out[i * row_size + e] = x[row * row_size + e];
  }
}

template <typename T>
void index_select_backward_cpu(const T* dy, const int64_t* index, int64_t count, int64_t rows,
                               int64_t row_size, T* dx) {
  for (int64_t e = 0; e < rows * row_size; ++e) dx[e] = T(0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = index[i];
    for (int64_t e = 0; e < row_size; ++e) dx[row * row_size + e] += dy[i * row_size + e];
  }
}

ENGINE_INSTANTIATE_FLOATING(index_select_forward_cpu);
ENGINE_INSTANTIATE(index_select_forward_cpu, int64_t);
ENGINE_INSTANTIATE_FLOATING(index_select_backward_cpu);

}  // namespace engine::kernels
