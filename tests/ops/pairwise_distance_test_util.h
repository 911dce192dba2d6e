// Shared by the pairwise-distance tests on the CPU and on CUDA.
#pragma once

#include "engine/ops.h"

namespace ops_test {

// The metric's enumerator name, for INFO and failure messages.
inline const char* metric_name(engine::DistanceMetric metric) {
  switch (metric) {
    case engine::DistanceMetric::Euclidean:
      return "Euclidean";
    case engine::DistanceMetric::SquaredEuclidean:
      return "SquaredEuclidean";
    case engine::DistanceMetric::Cosine:
      return "Cosine";
  }
  return "?";
}

}  // namespace ops_test
