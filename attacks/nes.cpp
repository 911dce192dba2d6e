// The NES black-box attack (header: attacks/nes.h).
#include "attacks/nes.h"

#include <cmath>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"

namespace attacks {

using engine::Tensor;

double nes_sigma(const NesOptions& options, double eps) {
  return options.sigma > 0.0 ? options.sigma : 2.0 * eps;
}

namespace {

void check_options(const NesOptions& options) {
  ENGINE_CHECK(options.population >= 2 && options.population % 2 == 0,
               "nes: the population must be even and >= 2 (antithetic pairs), got ",
               options.population);
  ENGINE_CHECK(std::isfinite(options.sigma) && options.sigma >= 0.0,
               "nes: sigma must be finite and >= 0, got ", options.sigma);
}

// x projected onto the eps-ball around x0 and into [0, 1].
Tensor project(const Tensor& x, const Tensor& x0, double eps) {
  return engine::clamp(x0 + engine::clamp(x - x0, -eps, eps), 0.0, 1.0);
}

// [B] -> [B, 1, ..., 1], broadcastable against the images.
Tensor per_image(const Tensor& rows, const Tensor& images) {
  engine::Shape shape(images.dim(), 1);
  shape[0] = images.size(0);
  return rows.reshape(shape);
}

}  // namespace

Tensor nes_gradient(const Tensor& x, const Tensor& x0, const RowLoss& loss, int64_t step,
                    double eps, const NesOptions& options, engine::Generator& gen,
                    double* mean_loss) {
  check_options(options);
  ENGINE_CHECK(x.shape() == x0.shape() && x.dim() >= 2, "nes_gradient: x ", x.str(), " and x0 ",
               x0.str(), " must have one shape [B, ...]");
  engine::NoGradGuard no_grad;
  const double sigma = nes_sigma(options, eps);
  const int64_t pairs = options.population / 2;
  Tensor estimate = Tensor::zeros(x.shape(), x.dtype(), x.device());
  double total = 0.0;
  for (int64_t j = 0; j < pairs; ++j) {
    const Tensor offset =
        engine::clamp(engine::normal(x.shape(), 0.0, sigma, gen, x.dtype(), x.device()), -eps, eps);
    const Tensor plus = loss(project(x + offset, x0, eps), step);
    const Tensor minus = loss(project(x - offset, x0, eps), step);
    ENGINE_CHECK(plus.dim() == 1 && plus.size(0) == x.size(0) && minus.shape() == plus.shape(),
                 "nes_gradient: the loss must give one value per image [", x.size(0), "], got ",
                 plus.str());
    estimate = estimate + per_image(plus - minus, x) * offset;
    if (mean_loss != nullptr) total += engine::sum(plus + minus).item();
  }
  if (mean_loss != nullptr) {
    *mean_loss = total / static_cast<double>(options.population * x.size(0));
  }
  return estimate * (1.0 / (static_cast<double>(options.population) * sigma));
}

Tensor nes_attack(const Tensor& images, const RowLoss& loss, const PgdOptions& pgd,
                  const NesOptions& options, engine::Generator& gen, NesTrace* trace) {
  check_options(options);
  ENGINE_CHECK(std::isfinite(pgd.eps) && pgd.eps >= 0.0, "nes: eps must be finite and >= 0, got ",
               pgd.eps);
  ENGINE_CHECK(pgd.steps >= 1, "nes: steps must be >= 1, got ", pgd.steps);
  engine::NoGradGuard no_grad;
  const Tensor x0 = images.detach();
  const double step_size = pgd_step_size(pgd);
  Tensor x = x0;
  if (pgd.random_start && pgd.eps > 0.0) {
    engine::Generator start(pgd.seed);
    x = engine::clamp(
        x0 + engine::uniform(x0.shape(), -pgd.eps, pgd.eps, start, x0.dtype(), x0.device()), 0.0,
        1.0);
  }
  if (trace != nullptr) *trace = NesTrace{};
  for (int64_t t = 0; t < pgd.steps; ++t) {
    double mean_loss = 0.0;
    const Tensor estimate = nes_gradient(x, x0, loss, t, pgd.eps, options, gen, &mean_loss);
    x = engine::pgd_step(x, x0, estimate, step_size, pgd.eps, nullptr);
    if (trace != nullptr) {
      trace->objective.push_back(mean_loss);
      trace->steps = t + 1;
      trace->queries_per_image += options.population;
    }
  }
  return x;
}

}  // namespace attacks
