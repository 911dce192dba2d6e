// Metric names (metric.h).
#include "kernels/common/metric.h"

#include "kernels/common/check.h"

namespace engine::kernels {

Metric parse_metric(const std::string& name) {
  if (name == "N" || name == "n") return Metric::N;
  if (name == "E" || name == "e") return Metric::E;
  if (name == "C" || name == "c") return Metric::C;
  engine::fail("unknown distance metric '", name,
               "' (expected N (normalized Euclidean), E (Euclidean) or C (cosine))");
}

const char* metric_name(Metric metric) {
  switch (metric) {
    case Metric::N:
      return "N";
    case Metric::E:
      return "E";
    case Metric::C:
      return "C";
  }
  return "?";
}

}  // namespace engine::kernels
