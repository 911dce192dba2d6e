// pairwise_distance on the CPU: the reference loops and the fast path the CPU ops run (math,
// layout and cost in pairwise_distance.h).
//
// The fast path computes the same formulas in the same precision (double accumulators), with two
// changes, both about speed:
// - Parallel: out's rows (forward), grad_a's rows and grad_b's rows (backward) are independent,
//   so OpenMP splits each over the cores (static schedule: the result does not depend on the
//   number of threads). Problems under 2^20 pair x dimension terms run on one thread.
// - Vectorized: `omp simd reduction` lets the compiler keep one partial sum per vector lane in
//   the d-loops of the distances, norms and dot products. The additions then happen in another
//   order than the reference's, so a value can differ from it in the last bits of the double
//   before the rounding to T (still exactly 0 for identical rows: every difference is 0).
// The backward recomputes each pair's coefficient in both gradient loops (grad_a by rows of a,
// grad_b by rows of b) instead of storing an N x M matrix: no memory beyond one row per thread.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/cpu_parallel.h"
#include "kernels/common/instantiate.h"
#include "kernels/pairwise_distance/pairwise_distance.h"

namespace engine::kernels {
namespace {

template <typename T>
double squared_distance(const T* a_row, const T* b_row, int64_t D) {
  double sum = 0.0;
  for (int64_t d = 0; d < D; ++d) {
    const double diff = double(a_row[d]) - double(b_row[d]);
    sum += diff * diff;
  }
  return sum;
}

template <typename T>
double dot(const T* a_row, const T* b_row, int64_t D) {
  double sum = 0.0;
  for (int64_t d = 0; d < D; ++d) sum += double(a_row[d]) * double(b_row[d]);
  return sum;
}

template <typename T>
std::vector<double> row_norms(const T* x, int64_t rows, int64_t D) {
  std::vector<double> norms(rows);
  for (int64_t i = 0; i < rows; ++i) norms[i] = std::sqrt(dot(x + i * D, x + i * D, D));
  return norms;
}

}  // namespace

template <typename T>
void pairwise_distance_forward_cpu(const T* a, const T* b, int64_t N, int64_t M, int64_t D,
                                   PairwiseMetric metric, T eps, T* out) {
  std::vector<double> norm_a, norm_b;
  if (metric == PairwiseMetric::Cosine) {
    norm_a = row_norms(a, N, D);
    norm_b = row_norms(b, M, D);
  }
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < M; ++j) {
      const T* a_row = a + i * D;
      const T* b_row = b + j * D;
      double value = 0.0;
      switch (metric) {
        case PairwiseMetric::SquaredEuclidean:
          value = squared_distance(a_row, b_row, D);
          break;
        case PairwiseMetric::Euclidean:
          value = std::sqrt(std::max(squared_distance(a_row, b_row, D), 0.0));
          break;
        case PairwiseMetric::Cosine:
          value = 1.0 - dot(a_row, b_row, D) /
                            (std::max(norm_a[i], double(eps)) * std::max(norm_b[j], double(eps)));
          break;
      }
      out[i * M + j] = static_cast<T>(value);
    }
  }
}

template <typename T>
void pairwise_distance_backward_cpu(const T* grad_out, const T* a, const T* b, int64_t N, int64_t M,
                                    int64_t D, PairwiseMetric metric, T eps, T* grad_a, T* grad_b) {
  std::vector<double> ga(grad_a ? N * D : 0, 0.0), gb(grad_b ? M * D : 0, 0.0);
  std::vector<double> norm_a, norm_b;
  if (metric == PairwiseMetric::Cosine) {
    norm_a = row_norms(a, N, D);
    norm_b = row_norms(b, M, D);
  }
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < M; ++j) {
      const T* a_row = a + i * D;
      const T* b_row = b + j * D;
      const double g = grad_out[i * M + j];
      if (metric == PairwiseMetric::Cosine) {
        const double ra = std::max(norm_a[i], double(eps)), rb = std::max(norm_b[j], double(eps));
        const double s = dot(a_row, b_row, D) / (ra * rb);
        // Where the norm is clamped at eps the divisor is a constant: no self term.
        const double self_a = norm_a[i] >= eps ? s / (ra * ra) : 0.0;
        const double self_b = norm_b[j] >= eps ? s / (rb * rb) : 0.0;
        for (int64_t d = 0; d < D; ++d) {
          if (grad_a) ga[i * D + d] -= g * (b_row[d] / (ra * rb) - self_a * a_row[d]);
          if (grad_b) gb[j * D + d] -= g * (a_row[d] / (ra * rb) - self_b * b_row[d]);
        }
        continue;
      }
      // (a_i - b_j) times the derivative of the distance with respect to the squared distance.
      double coefficient = 2.0 * g;
      if (metric == PairwiseMetric::Euclidean) {
        const double distance = std::sqrt(squared_distance(a_row, b_row, D));
        coefficient = distance > 0.0 ? g / distance : 0.0;
      }
      for (int64_t d = 0; d < D; ++d) {
        const double term = coefficient * (double(a_row[d]) - double(b_row[d]));
        if (grad_a) ga[i * D + d] += term;
        if (grad_b) gb[j * D + d] -= term;
      }
    }
  }
  for (size_t e = 0; e < ga.size(); ++e) grad_a[e] = static_cast<T>(ga[e]);
  for (size_t e = 0; e < gb.size(); ++e) grad_b[e] = static_cast<T>(gb[e]);
}

// ---------------------------------------------------------------------------------------------
// Fast path
// ---------------------------------------------------------------------------------------------

namespace {

template <typename T>
double squared_distance_simd(const T* a_row, const T* b_row, int64_t D) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < D; ++d) {
    const double diff = double(a_row[d]) - double(b_row[d]);
    sum += diff * diff;
  }
  return sum;
}

template <typename T>
double dot_simd(const T* a_row, const T* b_row, int64_t D) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t d = 0; d < D; ++d) sum += double(a_row[d]) * double(b_row[d]);
  return sum;
}

template <typename T>
std::vector<double> row_norms_simd(const T* x, int64_t rows, int64_t D) {
  std::vector<double> norms(rows);
  for (int64_t i = 0; i < rows; ++i) norms[i] = std::sqrt(dot_simd(x + i * D, x + i * D, D));
  return norms;
}

// What one pair (a_i, b_j) adds to the gradients, as in the reference's backward:
//   (squared) Euclidean:  da_i += c (a_i - b_j),            db_j -= c (a_i - b_j)
//   cosine:               da_i -= c b_j - self_a a_i,        db_j -= c a_i - self_b b_j
// with c = 2g or g / dist (0 at dist 0) for the Euclidean metrics, c = g / (r_a r_b),
// self_a = g [|a_i| >= eps] s / r_a^2 and self_b likewise for cosine.
struct PairCoefficients {
  double c = 0.0, self_a = 0.0, self_b = 0.0;
};

template <typename T>
PairCoefficients pair_coefficients(double g, const T* a_row, const T* b_row, int64_t D,
                                   PairwiseMetric metric, double norm_a, double norm_b,
                                   double eps) {
  PairCoefficients k;
  if (metric == PairwiseMetric::Cosine) {
    const double ra = std::max(norm_a, eps), rb = std::max(norm_b, eps);
    const double s = dot_simd(a_row, b_row, D) / (ra * rb);
    k.c = g / (ra * rb);
    k.self_a = norm_a >= eps ? g * s / (ra * ra) : 0.0;
    k.self_b = norm_b >= eps ? g * s / (rb * rb) : 0.0;
  } else if (metric == PairwiseMetric::Euclidean) {
    const double distance = std::sqrt(squared_distance_simd(a_row, b_row, D));
    k.c = distance > 0.0 ? g / distance : 0.0;
  } else {
    k.c = 2.0 * g;
  }
  return k;
}

// One gradient of the backward, by rows of its own operand: da_i sums over the rows b_j
// (for_a), db_j over the rows a_i. Each row is one thread's, summed in the order of the other
// operand's rows, as in the reference.
template <typename T>
void gradient_by_rows(bool for_a, const T* grad_out, const T* a, const T* b, int64_t N, int64_t M,
                      int64_t D, PairwiseMetric metric, const std::vector<double>& norm_a,
                      const std::vector<double>& norm_b, double eps, T* grad) {
  const int64_t rows = for_a ? N : M, others = for_a ? M : N;
#pragma omp parallel if (N * M * D >= kMinParallelWork)
  {
    std::vector<double> acc(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t o = 0; o < others; ++o) {
        const int64_t i = for_a ? r : o, j = for_a ? o : r;
        const T* a_row = a + i * D;
        const T* b_row = b + j * D;
        const PairCoefficients k = pair_coefficients(double(grad_out[i * M + j]), a_row, b_row, D,
                                                     metric, norm_a[i], norm_b[j], eps);
        if (metric == PairwiseMetric::Cosine) {  // da_i -= c b_j - self_a a_i, and the mirror
          const T* own = for_a ? a_row : b_row;
          const T* other = for_a ? b_row : a_row;
          const double self = for_a ? k.self_a : k.self_b;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) acc[d] -= k.c * other[d] - self * own[d];
        } else {  // da_i += c (a_i - b_j), db_j -= c (a_i - b_j)
          const double c = for_a ? k.c : -k.c;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) acc[d] += c * (double(a_row[d]) - double(b_row[d]));
        }
      }
      for (int64_t d = 0; d < D; ++d) grad[r * D + d] = static_cast<T>(acc[d]);
    }
  }
}

}  // namespace

template <typename T>
void pairwise_distance_forward_fast_cpu(const T* a, const T* b, int64_t N, int64_t M, int64_t D,
                                        PairwiseMetric metric, T eps, T* out) {
  std::vector<double> norm_a, norm_b;
  if (metric == PairwiseMetric::Cosine) {
    norm_a = row_norms_simd(a, N, D);
    norm_b = row_norms_simd(b, M, D);
  }
#pragma omp parallel for schedule(static) if (N * M * D >= kMinParallelWork)
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < M; ++j) {
      const T* a_row = a + i * D;
      const T* b_row = b + j * D;
      double value = 0.0;
      switch (metric) {
        case PairwiseMetric::SquaredEuclidean:
          value = squared_distance_simd(a_row, b_row, D);
          break;
        case PairwiseMetric::Euclidean:
          value = std::sqrt(squared_distance_simd(a_row, b_row, D));
          break;
        case PairwiseMetric::Cosine:
          value = 1.0 - dot_simd(a_row, b_row, D) /
                            (std::max(norm_a[i], double(eps)) * std::max(norm_b[j], double(eps)));
          break;
      }
      out[i * M + j] = static_cast<T>(value);
    }
  }
}

template <typename T>
void pairwise_distance_backward_fast_cpu(const T* grad_out, const T* a, const T* b, int64_t N,
                                         int64_t M, int64_t D, PairwiseMetric metric, T eps,
                                         T* grad_a, T* grad_b) {
  std::vector<double> norm_a(N, 0.0), norm_b(M, 0.0);
  if (metric == PairwiseMetric::Cosine) {
    norm_a = row_norms_simd(a, N, D);
    norm_b = row_norms_simd(b, M, D);
  }
  if (grad_a != nullptr) {
    gradient_by_rows(true, grad_out, a, b, N, M, D, metric, norm_a, norm_b, double(eps), grad_a);
  }
  if (grad_b != nullptr) {
    gradient_by_rows(false, grad_out, a, b, N, M, D, metric, norm_a, norm_b, double(eps), grad_b);
  }
}

ENGINE_INSTANTIATE_FLOATING(pairwise_distance_forward_cpu);
ENGINE_INSTANTIATE_FLOATING(pairwise_distance_backward_cpu);
ENGINE_INSTANTIATE_FLOATING(pairwise_distance_forward_fast_cpu);
ENGINE_INSTANTIATE_FLOATING(pairwise_distance_backward_fast_cpu);

}  // namespace engine::kernels
