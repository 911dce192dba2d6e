// Intra-Class Structure term (math in ics.h): a margin-0 triplet loss, scaled.
#include "losses/ics.h"

#include <cmath>

#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/triplet.h"

namespace losses {

engine::Tensor ics_loss(const engine::Tensor& clean_anchors,
                        const engine::Tensor& adversarial_anchors,
                        const engine::Tensor& clean_positives, Metric metric, double lambda,
                        double margin) {
  ENGINE_CHECK(std::isfinite(lambda) && lambda >= 0.0,
               "ics_loss: lambda must be finite and >= 0, got ", lambda);
  ENGINE_CHECK(std::isfinite(margin) && margin >= 0.0,
               "ics_loss: margin must be finite and >= 0, got ", margin);
  return triplet_loss_rows(clean_anchors, adversarial_anchors, clean_positives, metric, margin) *
         lambda;
}

}  // namespace losses
