// matmul, CPU: the reference triple loop and the Eigen GEMM used by the engine (math and layout
// in matmul.h). Parallelization: plain loops for the reference; fixed output tiles over OpenMP
// threads for the fast path, each tile one single-threaded Eigen product, so the result does not
// depend on the number of threads (kernels/common/cpu_gemm.h).
#include "kernels/common/instantiate.h"
#include "kernels/matmul/matmul.h"

#include <Eigen/Core>
#include <algorithm>

#include "kernels/common/cpu_gemm.h"
#include "kernels/common/cpu_parallel.h"

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
  // A tile is a block of a stored matrix: its own rows and columns, the full matrix's row stride.
  using Stride = Eigen::OuterStride<>;
  using Block = Eigen::Map<Matrix, 0, Stride>;
  using ConstBlock = Eigen::Map<const Matrix, 0, Stride>;
  if (k == 0) {  // an empty sum: nothing to add, and a fresh C is all zeros
    if (!accumulate) Eigen::Map<Matrix>(c, m, n).setZero();
    return;
  }
  use_fixed_gemm_blocking();
  const int64_t row_tiles = (m + kGemmTileRows - 1) / kGemmTileRows;
  const int64_t col_tiles = (n + kGemmTileCols - 1) / kGemmTileCols;
  // Tile t covers C[i0 : i0 + rows, j0 : j0 + cols]. Its product reads rows i0.. of op(A) and
  // columns j0.. of op(B); in the stored buffers those are rows of A (columns when trans_a) and
  // columns of B (rows when trans_b). .transpose() is a free view, so nothing is copied.
#pragma omp parallel for schedule(static) if (2 * m * n * k >= kMinParallelWork)
  for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
    const int64_t i0 = (t / col_tiles) * kGemmTileRows, j0 = (t % col_tiles) * kGemmTileCols;
    const int64_t rows = std::min(kGemmTileRows, m - i0), cols = std::min(kGemmTileCols, n - j0);
    Block out(c + i0 * n + j0, rows, cols, Stride(n));
    const ConstBlock a_stored = trans_a ? ConstBlock(a + i0, k, rows, Stride(m))
                                        : ConstBlock(a + i0 * k, rows, k, Stride(k));
    const ConstBlock b_stored = trans_b ? ConstBlock(b + j0 * k, cols, k, Stride(k))
                                        : ConstBlock(b + j0, k, cols, Stride(n));
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

ENGINE_INSTANTIATE_FLOATING(matmul_cpu);
ENGINE_INSTANTIATE_FLOATING(matmul_fast_cpu);
ENGINE_INSTANTIATE_FLOATING(add_row_bias_cpu);
ENGINE_INSTANTIATE_FLOATING(column_sums_cpu);

}  // namespace engine::kernels
