// matmul, CPU: the reference triple loop and the Eigen GEMM used by the engine (math and layout
// in matmul.h). Parallelization: plain loops for the reference; the Eigen product may use
// OpenMP threads internally.
#include "kernels/matmul/matmul.h"

#include <Eigen/Core>

namespace engine::kernels {

template <typename T>
void matmul_cpu(int64_t m, int64_t n, int64_t k, const T* a, const T* b, bool trans_a, bool trans_b,
                T* c, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      T total = accumulate ? c[i * n + j] : T(0);
      for (int64_t p = 0; p < k; ++p) {
        T a_ip = trans_a ? a[p * m + i] : a[i * k + p];
        T b_pj = trans_b ? b[j * k + p] : b[p * n + j];
        total += a_ip * b_pj;
      }
      c[i * n + j] = total;
    }
  }
}

template <typename T>
void matmul_fast_cpu(int64_t m, int64_t n, int64_t k, const T* a, const T* b, bool trans_a,
                     bool trans_b, T* c, bool accumulate) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Matrix> out(c, m, n);
  if (k == 0) {  // an empty sum: nothing to add, and a fresh C is all zeros
    if (!accumulate) out.setZero();
    return;
  }
  // The maps describe the buffers as stored; .transpose() is a free view, so op(A) and op(B)
  // are never copied.
  Eigen::Map<const Matrix> a_stored(a, trans_a ? k : m, trans_a ? m : k);
  Eigen::Map<const Matrix> b_stored(b, trans_b ? n : k, trans_b ? k : n);
  auto multiply = [&](const auto& lhs, const auto& rhs) {
    if (accumulate) {
      out.noalias() += lhs * rhs;
    } else {
      out.noalias() = lhs * rhs;
    }
  };
  // The four cases are spelled out because A and A^T are different Eigen expression types.
  if (!trans_a && !trans_b) {
    multiply(a_stored, b_stored);
  } else if (!trans_a && trans_b) {
    multiply(a_stored, b_stored.transpose());
  } else if (trans_a && !trans_b) {
    multiply(a_stored.transpose(), b_stored);
  } else {
    multiply(a_stored.transpose(), b_stored.transpose());
  }
}

template <typename T>
void add_row_bias_cpu(int64_t m, int64_t n, const T* bias, T* c) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * n + j] += bias[j];
  }
}

template <typename T>
void column_sums_cpu(int64_t m, int64_t n, const T* dy, T* db) {
  for (int64_t j = 0; j < n; ++j) db[j] = T(0);
  // Row by row, so dy is read in memory order.
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) db[j] += dy[i * n + j];
  }
}

template void matmul_cpu<float>(int64_t, int64_t, int64_t, const float*, const float*, bool, bool,
                                float*, bool);
template void matmul_cpu<double>(int64_t, int64_t, int64_t, const double*, const double*, bool,
                                 bool, double*, bool);
template void matmul_fast_cpu<float>(int64_t, int64_t, int64_t, const float*, const float*, bool,
                                     bool, float*, bool);
template void matmul_fast_cpu<double>(int64_t, int64_t, int64_t, const double*, const double*, bool,
                                      bool, double*, bool);
template void add_row_bias_cpu<float>(int64_t, int64_t, const float*, float*);
template void add_row_bias_cpu<double>(int64_t, int64_t, const double*, double*);
template void column_sums_cpu<float>(int64_t, int64_t, const float*, float*);
template void column_sums_cpu<double>(int64_t, int64_t, const double*, double*);

}  // namespace engine::kernels
