// The PGD engine (header: attacks/pgd.h).
#include "attacks/pgd.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"

namespace attacks {

PgdOptions seeded(PgdOptions options, engine::Generator& gen) {
  if (options.random_start) {
    // A distinct, reproducible seed per call: the generator's seed mixed with the block it hands
    // out (splitmix64's finalizer, so neighbouring blocks give unrelated seeds).
    options.seed = engine::splitmix64_finalize(gen.seed + engine::kGoldenGamma * (gen.take(1) + 1));
  }
  return options;
}

double pgd_step_size(const PgdOptions& options) {
  return options.steps == 1 ? options.eps : options.alpha;
}

std::vector<double> PgdTrace::objective_values() const {
  std::vector<double> values;
  values.reserve(objective.size());
  for (const engine::Tensor& t : objective) values.push_back(t.item());
  return values;
}

std::vector<double> PgdTrace::max_delta_values() const {
  std::vector<double> values;
  values.reserve(max_delta.size());
  for (const engine::Tensor& t : max_delta) values.push_back(t.item());
  return values;
}

engine::Tensor pgd_attack(const engine::Tensor& images, const Objective& objective,
                          const PgdOptions& options, PgdTrace* trace) {
  ENGINE_CHECK(std::isfinite(options.eps) && options.eps >= 0.0,
               "pgd_attack: eps must be finite and >= 0, got ", options.eps);
  ENGINE_CHECK(std::isfinite(options.alpha) && options.alpha >= 0.0,
               "pgd_attack: alpha must be finite and >= 0, got ", options.alpha);
  ENGINE_CHECK(options.steps >= 1, "pgd_attack: steps must be >= 1, got ", options.steps);
  ENGINE_CHECK(std::isfinite(options.stop_tolerance) && options.stop_tolerance >= 0.0,
               "pgd_attack: stop_tolerance must be finite and >= 0, got ", options.stop_tolerance);
  const engine::Tensor x0 = images.detach();
  const double step = pgd_step_size(options);

  if (trace != nullptr) trace->steps = 0;
  double previous_objective = -1.0;  // robrank's initial saturation state
  engine::Tensor x = x0;
  if (options.random_start && options.eps > 0.0) {
    engine::NoGradGuard no_grad;
    engine::Generator gen(options.seed);
    const engine::Tensor noise =
        engine::uniform(x0.shape(), -options.eps, options.eps, gen, x0.dtype(), x0.device());
    x = engine::clamp(x0 + noise, 0.0, 1.0);
  }
  for (int64_t t = 0; t < options.steps; ++t) {
    engine::Tensor leaf = x.detach();
    leaf.set_requires_grad(true);
    const engine::Tensor value = objective(leaf, t);
    ENGINE_CHECK(value.defined() && value.numel() == 1,
                 "pgd_attack: the objective must return one element, got ",
                 value.defined() ? value.str() : std::string("an undefined tensor"));
    ENGINE_CHECK(value.requires_grad(), "pgd_attack: the objective at step ", t,
                 " does not depend on the images (no gradient path)");
    const engine::Tensor gradient = engine::grad({value}, {leaf})[0];
    engine::Tensor max_delta;
    x = engine::pgd_step(leaf, x0, gradient, step, options.eps,
                         trace != nullptr ? &max_delta : nullptr);
    if (trace != nullptr) {
      trace->objective.push_back(value.detach());
      trace->max_delta.push_back(max_delta);
      trace->steps = t + 1;
    }
    if (options.stop_tolerance > 0.0) {
      const double current = value.item();  // the one host synchronization of this mode
      if (std::abs(current - previous_objective) < options.stop_tolerance) break;
      previous_objective = current;
    }
  }
  return x;
}

PerturbationReport measure_perturbation(const engine::Tensor& images,
                                        const engine::Tensor& adversarial) {
  ENGINE_CHECK(images.shape() == adversarial.shape(), "measure_perturbation: images ", images.str(),
               " and adversarial ", adversarial.str(), " differ in shape");
  const std::vector<double> x = images.to_vector();
  const std::vector<double> a = adversarial.to_vector();
  PerturbationReport report;
  report.min_pixel = std::numeric_limits<double>::infinity();
  report.max_pixel = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) {
      ++report.nan_count;
      continue;
    }
    report.max_delta = std::max(report.max_delta, std::abs(a[i] - x[i]));
    report.min_pixel = std::min(report.min_pixel, a[i]);
    report.max_pixel = std::max(report.max_pixel, a[i]);
  }
  if (a.empty()) report.min_pixel = report.max_pixel = 0.0;
  return report;
}

void check_perturbation(const PerturbationReport& report, double eps, const char* attack) {
  ENGINE_CHECK(report.nan_count == 0, attack, ": ", report.nan_count,
               " adversarial pixels are NaN (a NaN in the model's gradient or the images)");
  ENGINE_CHECK(report.max_delta <= eps + 1e-6, attack, ": max|delta|_inf = ", report.max_delta,
               " exceeds eps = ", eps, " by more than 1e-6");
  ENGINE_CHECK(report.min_pixel >= 0.0 && report.max_pixel <= 1.0, attack,
               ": adversarial pixels leave [0, 1]: range [", report.min_pixel, ", ",
               report.max_pixel, "]");
}

EvalModeGuard::EvalModeGuard(engine::nn::Module& module)
    : module_(module), was_training_(module.is_training()) {
  module_.eval();
}

EvalModeGuard::~EvalModeGuard() { module_.train(was_training_); }

}  // namespace attacks
