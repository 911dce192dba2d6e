// ArcFace (Deng et al., CVPR'19) as a DML loss (MDProp §C.1.2: additive angular margin
// m = 0.5, scale s = 16, class centers W [C, D] trained with their own learning rate 5e-4).
//
// With x_i = embedding i / |.|, w_c = W_c / |W_c|, cos_ic = <x_i, w_c> and theta_i the angle to
// the center of i's own class y_i:
//   logit_ic = s cos_ic                     for c != y_i
//   logit_iy = s cos(theta_i + m) = s (cos_iy cos m - sqrt(1 - cos_iy^2) sin m)
//   L        = mean_i cross_entropy(logit_i, y_i)
// cos(theta + m) is expanded with the angle-sum identity (no acos in the engine); cos_iy is
// clamped to [-1 + 1e-6, 1 - 1e-6] inside that expression so the sqrt's gradient stays finite.
// As in the paper's pseudocode, no "easy margin" and no linear fallback for theta + m > pi.
// Centers start uniform in [-1/sqrt(D), 1/sqrt(D)], as in the "Revisiting DML" code.
//
// That code's criterion (Roth et al.'s criteria/arcface.py, which MDProp's code copies) differs
// in two ways, so its ArcFace numbers are not this loss's: it adds s (cos(theta + m) - cos theta)
// to every logit of row i, not only to the target's (its one-hot `pick` is not applied), a
// per-row constant that cross-entropy ignores, so the margin has no effect there; and it clamps
// every cosine to [1e-10, 1 - 1e-10], so a class at a negative cosine gets no gradient. This
// loss is the paper's (MDProp §C.1.2 and Deng et al.): the margin only on the target logit.
// revisiting_compat = true computes that code's logits instead, so its published numbers (MDProp's
// ArcFace rows) can be compared: s (clamp(cos_ic) + cos(theta_i + m) - clamp(cos_iy)) for every
// c, with clamp to [1e-10, 1 - 1e-10].
//
// The centers' own learning rate: put parameters() (or param_group()) in a separate optimizer
// parameter group with lr = options().centers_lr.
#pragma once

#include <cstdint>

#include "engine/nn/module.h"
#include "engine/optim/adam.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace losses {

struct ArcFaceOptions {
  double margin = 0.5;             // additive angular margin (radians)
  double scale = 16.0;             // radius of the hypersphere the logits live on
  double centers_lr = 5e-4;        // learning rate of the class centers' parameter group
  bool revisiting_compat = false;  // the "Revisiting DML" / MDProp code's logits (see above)
};

class ArcFaceLoss : public engine::nn::Module {
 public:
  ArcFaceLoss(int64_t num_classes, int64_t embedding_dim, engine::Generator& gen,
              const ArcFaceOptions& options = {}, engine::DType dtype = engine::DType::F32);

  // embeddings [B, D], labels I64 [B] in [0, num_classes). Differentiable in both the
  // embeddings and the centers.
  engine::Tensor loss(const engine::Tensor& embeddings, const engine::Tensor& labels) const;
  // The margin-adjusted, scaled logits [B, C] that loss() feeds to cross_entropy.
  engine::Tensor logits(const engine::Tensor& embeddings, const engine::Tensor& labels) const;

  // Not a one-input module: throws, pointing at loss().
  engine::Tensor forward(const engine::Tensor& x) override;

  const engine::Tensor& centers() const { return centers_; }  // "centers", [C, D]
  const ArcFaceOptions& options() const { return options_; }
  int64_t num_classes() const { return centers_.size(0); }
  // The centers as an Adam parameter group with lr = options().centers_lr.
  engine::optim::AdamGroup param_group(double weight_decay = 0.0) const;

 private:
  ArcFaceOptions options_;
  engine::Tensor centers_;
};

}  // namespace losses
