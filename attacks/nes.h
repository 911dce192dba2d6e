// The NES black-box attack (Ilyas et al. 2018, "Black-box adversarial attacks with limited queries
// and information"; robrank attacks/advrank.py, AdvRank.__attack_NES): the same sign-step,
// L_inf-projected loop as PGD (attacks/pgd.h), but each image's gradient is ESTIMATED from its
// loss at random points around it — forward passes only, no engine::grad on the input. Every
// attack kind plugs in through its per-image loss (AttackPlan::row_objective), so the black-box
// attack has the white-box attack's selection, objective and measures (docs/attacks.md
// "Black-box and transfer attacks").
//
// Per image and step t, with N = population (even), sigma (default 2 eps, robrank's eps / 0.5):
//   u_j ~ N(0, I), p_j = clamp(sigma u_j, -eps, eps)            j = 1 .. N/2 (antithetic pairs)
//   q_j+- = clamp(x0 + clamp(x_t +- p_j - x0, -eps, eps), 0, 1)  (N queries of the model)
//   g = 1 / (N sigma) * sum_j (L(q_j+) - L(q_j-)) p_j
//   x_{t+1} = clamp(x0 + clamp(x_t - a sign(g) - x0, -eps, eps), 0, 1)   (engine::pgd_step)
// robrank's code differs in three places, all bugs we do not reproduce: its projection of the
// query points uses max(x0 + eps, .) where x0 - eps is meant, so every point of the population is
// x0 + eps and the estimate is zero up to rounding; it steps x += lr sign(g), ASCENDING the loss
// its PGD descends; and its step is a fixed 2/255 (we use the spec's alpha, like PGD).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "attacks/pgd.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace attacks {

struct NesOptions {
  int64_t population = 0;  // N model queries per image and step; 0 = off (white-box PGD)
  double sigma = 0.0;      // the sampling scale; 0 = 2 eps
};

// sigma, or 2 eps when 0.
double nes_sigma(const NesOptions& options, double eps);

// Each image's loss [B] at the points [B, C, H, W] before step t: forward passes only.
using RowLoss = std::function<engine::Tensor(const engine::Tensor& points, int64_t step)>;

// The estimate g above for every image of x [B, ...] (x0 the clean images), drawing the u_j from
// gen. `mean_loss` (optional) receives the mean loss over the population.
engine::Tensor nes_gradient(const engine::Tensor& x, const engine::Tensor& x0, const RowLoss& loss,
                            int64_t step, double eps, const NesOptions& options,
                            engine::Generator& gen, double* mean_loss = nullptr);

struct NesTrace {
  int64_t steps = 0;
  int64_t queries_per_image = 0;  // model queries per image (population x steps)
  std::vector<double> objective;  // mean population loss at each step
};

// The attack: pgd's eps, alpha (eps when steps == 1), steps and random start; the noise from gen.
// Throws engine::Error for an odd or non-positive population or a negative sigma.
engine::Tensor nes_attack(const engine::Tensor& images, const RowLoss& loss, const PgdOptions& pgd,
                          const NesOptions& options, engine::Generator& gen,
                          NesTrace* trace = nullptr);

}  // namespace attacks
