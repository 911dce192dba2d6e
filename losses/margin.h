// Margin loss of Wu et al. (ICCV'17) as robrank's pmargin{N,E,C} (robrank
// losses/margin.py), with a learnable boundary beta:
//
//   l+_t = max(0, d(a_t, p_t) - beta + m)      l-_t = max(0, beta - d(a_t, n_t) + m)
//   L    = mean over {t : l+_t > 0} of l+_t  +  mean over {t : l-_t > 0} of l-_t
//
// (each mean 0 when no term is active, robrank's NaN -> 0). m = 0.2, beta starts at 0.6 and is
// trained by its own SGD optimizer with lr 5e-4 (param_group()). robrank L2-normalizes the
// embeddings for every metric, E included (quirk, kept); d = ||a - b + 1e-6|| for N and E,
// 1 - cos for C. beta is one scalar (shape []) shared by all classes, as in robrank. Wu et al.
// (and pytorch-metric-learning, Roth et al.'s code) start beta at 1.2, may keep one beta per
// class and normalize by the count of active terms of both kinds together; set
// loss.margin_loss.beta to 1.2 for their starting point.
#pragma once

#include <string>

#include "engine/nn/module.h"
#include "engine/optim/sgd.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "losses/distance.h"
#include "losses/miners.h"

namespace losses {

struct MarginLossOptions {
  double beta = 0.6;      // initial boundary
  double margin = 0.2;    // half-width of the band around beta
  double beta_lr = 5e-4;  // learning rate of beta's own SGD
};

// A module so that beta is saved, loaded and moved with to() like any parameter ("beta").
class MarginLoss : public engine::nn::Module {
 public:
  explicit MarginLoss(Metric metric = Metric::N, const MarginLossOptions& options = {},
                      engine::DType dtype = engine::DType::F32);

  // The loss on index triplets into embeddings [B, D].
  engine::Tensor loss(const engine::Tensor& embeddings, const Triplets& triplets) const;
  // robrank's pmargin: mine on the SPC-2 batch (random, or distance-weighted for pdmarginN),
  // then loss().
  engine::Tensor spc2_loss(const engine::Tensor& embeddings, const engine::Tensor& labels,
                           Miner miner, engine::Generator& gen) const;

  // Not a one-input module: throws, pointing at loss().
  engine::Tensor forward(const engine::Tensor& x) override;

  const engine::Tensor& beta() const { return beta_; }
  Metric metric() const { return metric_; }
  const MarginLossOptions& options() const { return options_; }
  // beta in its own SGD group with lr = options().beta_lr (robrank's separate optimizer).
  engine::optim::SgdGroup param_group() const;

 private:
  Metric metric_;
  MarginLossOptions options_;
  engine::Tensor beta_;
};

}  // namespace losses
