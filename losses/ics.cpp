// Intra-Class Structure term (math in ics.h): a margin-0 triplet loss, scaled.
#include "losses/ics.h"

#include <cmath>

#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/triplet.h"

namespace losses {

engine::Tensor ics_loss(const engine::Tensor& clean_anchors,
                        const engine::Tensor& adversarial_anchors,
                        const engine::Tensor& clean_positives, Metric metric, double lambda) {
  ENGINE_CHECK(std::isfinite(lambda) && lambda >= 0.0,
               "ics_loss: lambda must be finite and >= 0, got ", lambda);
  return triplet_loss_rows(clean_anchors, adversarial_anchors, clean_positives, metric, 0.0) *
         lambda;
}

}  // namespace losses
