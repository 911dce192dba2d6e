// pairwise_distance, CPU reference (math, layout and cost in pairwise_distance.h).
#include <algorithm>
#include <cmath>
#include <vector>

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

template void pairwise_distance_forward_cpu<float>(const float*, const float*, int64_t, int64_t,
                                                   int64_t, PairwiseMetric, float, float*);
template void pairwise_distance_forward_cpu<double>(const double*, const double*, int64_t, int64_t,
                                                    int64_t, PairwiseMetric, double, double*);
template void pairwise_distance_backward_cpu<float>(const float*, const float*, const float*,
                                                    int64_t, int64_t, int64_t, PairwiseMetric,
                                                    float, float*, float*);
template void pairwise_distance_backward_cpu<double>(const double*, const double*, const double*,
                                                     int64_t, int64_t, int64_t, PairwiseMetric,
                                                     double, double*, double*);

}  // namespace engine::kernels
