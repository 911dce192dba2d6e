// The PGD engine every attack and adversarial-training recipe uses (docs/attacks.md; Zhou et al.
// TPAMI eq. 6; robrank defenses/*.py, the PGD loop they share).
//
//   x_0 = x (or x + U(-eps, eps), clamped to [0, 1], with random_start)
//   for t = 0 .. steps-1:
//     g   = d objective(x_t, t) / d x_t         (engine::grad: the input gradient only — no
//                                               weight gradient is ever computed)
//     x_{t+1} = clamp(x + clip(x_t - a sign(g) - x, -eps, eps), 0, 1)   (engine::pgd_step, one
//                                               fused kernel on the GPU)
//   with a = alpha, except a = eps when steps == 1 (FGSM).
//
// The objective is DESCENDED as written (robrank's convention): an attack that wants to maximize
// something returns its negative. The caller puts the model in eval mode (EvalModeGuard below):
// batch statistics of adversarial images must not move BN's running averages, and rows must not
// interact through the batch.
//
// No host synchronization per step: the objective value and max|delta|_inf of every step stay on
// the device (PgdTrace) until the caller reads them after the loop.
//
// Two loops, the same bits (engine::attack_loop(), ENGINE_ATTACK_LOOP=eager|captured, in
// engine/backend.h): eager issues every step op by op through autograd; captured (CUDA images, two
// or more steps) runs step 0 eagerly, captures step 1 once as a CUDA graph (engine/cuda_graph.h)
// over buffers allocated once, and replays it for the remaining steps, with no autograd graph, no
// allocation and no host synchronization per step (the stop tolerance is checked every 4 steps,
// pgd.cpp says why). So an objective must do the same work with the same tensors at every step
// t >= 1 (only step 0 may differ, as the embedding-shift objectives' first-step offset does) and
// must not read device data on the host (the capture fails with an error naming the call).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/nn/module.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace attacks {

struct PgdOptions {
  double eps = 4.0 / 255.0;    // L_inf budget (robrank AdvRank's defaults: 4/255, 1/255, 24)
  double alpha = 1.0 / 255.0;  // step size (ignored when steps == 1: the step is eps)
  int64_t steps = 24;          // eta
  bool random_start = false;   // robrank never uses one
  uint64_t seed = 0;           // for the random start
  // > 0: stop once the objective stops moving — after step t, if |obj_t - obj_{t-1}| < tolerance
  // (obj_{-1} = -1) the loop ends (robrank's HM "saturation" stop, 1e-7). Reading obj_t costs one
  // host synchronization per step (per 4 steps in the captured loop), so it is off (0) for every
  // other attack.
  double stop_tolerance = 0.0;
  // The objective reads device data on the host at every step (LTM locates its arg-max there): a
  // CUDA graph cannot replay that, so the loop runs eager whatever engine::attack_loop() says.
  bool host_objective = false;
};

// `options` with its random-start seed drawn from `gen` (one Philox block), so each call's random
// start differs and follows the caller's stream: a training recipe's (part of the checkpointed
// mining stream) or an evaluation attack's (one draw per batch). Unchanged, and nothing drawn,
// when random_start is off.
PgdOptions seeded(PgdOptions options, engine::Generator& gen);

// The step size actually used: alpha, or eps for a single step (FGSM).
double pgd_step_size(const PgdOptions& options);

// The images' objective at step t (t = 0 .. steps-1): a one-element tensor, differentiable with
// respect to `images` (a leaf that requires grad).
using Objective = std::function<engine::Tensor(const engine::Tensor& images, int64_t step)>;

struct PgdTrace {
  int64_t steps = 0;                      // steps taken (< options.steps after an early stop)
  std::vector<engine::Tensor> objective;  // one-element tensors, value at x_t before step t
  std::vector<engine::Tensor> max_delta;  // one-element tensors, max |x_{t+1} - x| after step t
  // Host copies (one synchronization, after the loop).
  std::vector<double> objective_values() const;
  std::vector<double> max_delta_values() const;
};

// Returns the adversarial images (no grad, same shape/device/dtype as images). Throws
// engine::Error for eps < 0, alpha < 0, steps < 1 or a negative stop tolerance. That the images
// lie in [0, 1] is the caller's to check (attack_batch does, with models::check_pixels): here it
// would cost a device synchronization on every call, and the training adversaries get their
// images from the data loader.
engine::Tensor pgd_attack(const engine::Tensor& images, const Objective& objective,
                          const PgdOptions& options, PgdTrace* trace = nullptr);

// What every attack reports about its perturbation (docs/attacks.md): max |adv - x|_inf, NaN count
// and pixel range. check_perturbation throws engine::Error when max_delta > eps + 1e-6, any NaN, or
// a pixel outside [0, 1].
struct PerturbationReport {
  double max_delta = 0.0;
  int64_t nan_count = 0;
  double min_pixel = 0.0;
  double max_pixel = 0.0;
};
PerturbationReport measure_perturbation(const engine::Tensor& images,
                                        const engine::Tensor& adversarial);
void check_perturbation(const PerturbationReport& report, double eps, const char* attack);

// Puts a module in eval mode for its lifetime and restores the previous mode afterwards.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(engine::nn::Module& module);
  ~EvalModeGuard();
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  engine::nn::Module& module_;
  bool was_training_;
};

}  // namespace attacks
