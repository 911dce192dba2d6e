// The PGD engine (header: attacks/pgd.h).
#include "attacks/pgd.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/cuda_graph.h"
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

namespace {

// What one PGD step from x_t gives: x_{t+1}, the objective at x_t (detached) and, when asked,
// max |x_{t+1} - x|_inf (attacks/pgd.h, the loop's two lines).
struct StepOutput {
  engine::Tensor next;
  engine::Tensor value;
  engine::Tensor max_delta;
};

StepOutput pgd_step_once(const engine::Tensor& x, const engine::Tensor& x0,
                         const Objective& objective, int64_t t, double step, double eps,
                         bool want_max_delta) {
  engine::Tensor leaf = x.detach();
  leaf.set_requires_grad(true);
  const engine::Tensor value = objective(leaf, t);
  ENGINE_CHECK(value.defined() && value.numel() == 1,
               "pgd_attack: the objective must return one element, got ",
               value.defined() ? value.str() : std::string("an undefined tensor"));
  ENGINE_CHECK(value.requires_grad(), "pgd_attack: the objective at step ", t,
               " does not depend on the images (no gradient path)");
  const engine::Tensor gradient = engine::grad({value}, {leaf})[0];
  StepOutput out;
  out.next =
      engine::pgd_step(leaf, x0, gradient, step, eps, want_max_delta ? &out.max_delta : nullptr);
  out.value = value.detach();
  return out;
}

// The eager loop: every step issued op by op.
engine::Tensor pgd_eager(const engine::Tensor& x0, engine::Tensor x, const Objective& objective,
                         const PgdOptions& options, PgdTrace* trace) {
  const double step = pgd_step_size(options);
  double previous_objective = -1.0;  // robrank's initial saturation state
  for (int64_t t = 0; t < options.steps; ++t) {
    StepOutput out = pgd_step_once(x, x0, objective, t, step, options.eps, trace != nullptr);
    x = out.next;
    if (trace != nullptr) {
      trace->objective.push_back(out.value);
      trace->max_delta.push_back(out.max_delta);
      trace->steps = t + 1;
    }
    if (options.stop_tolerance > 0.0) {
      const double current = out.value.item();  // the one host synchronization of this mode
      if (std::abs(current - previous_objective) < options.stop_tolerance) break;
      previous_objective = current;
    }
  }
  return x;
}

// The captured loop checks the stop tolerance every kStopCheckInterval steps, not every step:
// reading the objective is a host synchronization, which empties the queue of replays the host
// has issued ahead of the GPU, so the GPU idles for the read and the next launch at every check.
// A ring of the last k images (one device-to-device copy per step) lets a stop found late return
// the image of the step that stopped, so the result and the trace are the eager loop's bits. 4
// cuts the synchronizations (and the idle gaps) to a quarter for 4 extra images of memory and at
// most 3 wasted steps' work per attack; not yet timed on a GPU (docs/performance.md).
constexpr int64_t kStopCheckInterval = 4;

// The captured loop (engine::AttackLoop::Captured): step 0 eagerly, then one CUDA graph of a step
// (engine/cuda_graph.h) captured and replayed for steps 1 .. steps-1. Every buffer the graph uses
// is allocated before step 0, which warms the allocator's cache for the capture, so the replays
// allocate nothing.
engine::Tensor pgd_captured(const engine::Tensor& x0, const engine::Tensor& start,
                            const Objective& objective, const PgdOptions& options,
                            PgdTrace* trace) {
  const double step = pgd_step_size(options);
  const bool stop_rule = options.stop_tolerance > 0.0;
  const bool want_trace = trace != nullptr;
  const engine::Device device = x0.device();
  engine::Tensor image = engine::Tensor::empty(x0.shape(), x0.dtype(), device);  // x_t
  engine::Tensor values, deltas;  // per step: the objective at x_t, max |x_{t+1} - x|
  if (want_trace || stop_rule) values = engine::Tensor::empty({options.steps}, x0.dtype(), device);
  if (want_trace) deltas = engine::Tensor::empty({options.steps}, x0.dtype(), device);
  std::vector<engine::Tensor> ring;  // ring[t % k]: x_{t+1}
  for (int64_t i = 0; stop_rule && i < kStopCheckInterval; ++i) {
    ring.push_back(engine::Tensor::empty(x0.shape(), x0.dtype(), device));
  }

  engine::Shape value_shape;
  auto keep = [&](int64_t t, const engine::Tensor& value, const engine::Tensor& max_delta) {
    value_shape = value.shape();
    if (values.defined()) values.select(0, t).copy_(value.reshape({}));
    if (want_trace) deltas.select(0, t).copy_(max_delta);
    if (stop_rule) ring[static_cast<std::size_t>(t % kStopCheckInterval)].copy_(image);
  };
  int64_t checked = 0;               // steps whose objective the stop rule has compared
  double previous_objective = -1.0;  // robrank's initial saturation state
  // Compares the objectives of steps checked .. last (one host synchronization); the step that
  // stopped, or -1.
  auto find_stop = [&](int64_t last) -> int64_t {
    const std::vector<double> read = values.slice(0, checked, last + 1).to_vector();
    for (std::size_t i = 0; i < read.size(); ++i) {
      if (std::abs(read[i] - previous_objective) < options.stop_tolerance) {
        return checked + static_cast<int64_t>(i);
      }
      previous_objective = read[i];
    }
    checked = last + 1;
    return -1;
  };

  // Step 0: eagerly (the objective may treat it apart, attacks/pgd.h), writing x_1 into `image`.
  {
    StepOutput first = pgd_step_once(start, x0, objective, 0, step, options.eps, want_trace);
    image.copy_(first.next);
    keep(0, first.value, first.max_delta);
  }
  // Steps 1 .. steps-1 (steps >= 2 here): one captured step, replayed. Step 0's objective is
  // compared at the first check, with steps 1 .. k-1.
  int64_t stopped = -1;
  engine::Tensor step_value, step_delta;  // the graph's, written by every replay
  {
    const engine::CudaGraph graph([&] {
      StepOutput out = pgd_step_once(image, x0, objective, 1, step, options.eps, want_trace);
      image.copy_(out.next);
      step_value = out.value;
      step_delta = out.max_delta;
    });
    for (int64_t t = 1; t < options.steps && stopped < 0; ++t) {
      graph.replay();
      keep(t, step_value, step_delta);
      const bool check = (t + 1) % kStopCheckInterval == 0 || t + 1 == options.steps;
      if (stop_rule && check) stopped = find_stop(t);
    }
  }
  const int64_t taken = stopped >= 0 ? stopped + 1 : options.steps;
  if (want_trace) {
    trace->steps = taken;
    for (int64_t t = 0; t < taken; ++t) {
      trace->objective.push_back(values.select(0, t).reshape(value_shape));
      trace->max_delta.push_back(deltas.select(0, t));
    }
  }
  return stopped >= 0 ? ring[static_cast<std::size_t>(stopped % kStopCheckInterval)] : image;
}

}  // namespace

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

  if (trace != nullptr) trace->steps = 0;
  engine::Tensor x = x0;
  if (options.random_start && options.eps > 0.0) {
    engine::NoGradGuard no_grad;
    engine::Generator gen(options.seed);
    const engine::Tensor noise =
        engine::uniform(x0.shape(), -options.eps, options.eps, gen, x0.dtype(), x0.device());
    x = engine::clamp(x0 + noise, 0.0, 1.0);
  }
  if (engine::attack_loop() == engine::AttackLoop::Captured && x0.device().is_cuda() &&
      options.steps > 1 && !options.host_objective) {
    return pgd_captured(x0, x, objective, options, trace);
  }
  return pgd_eager(x0, x, objective, options, trace);
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
