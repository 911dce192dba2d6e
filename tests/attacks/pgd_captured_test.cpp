// The captured PGD loop (attacks/pgd.h, ENGINE_ATTACK_LOOP=captured): on CUDA it gives the eager
// loop's bits -- images, objective trace, max_delta trace, steps taken, early stop included -- on
// a small C2F2 and through a defense's inner adversary; its replays allocate nothing; and a host
// synchronization planted in a captured step is an error. On the CUDA emulator here
// (attacks.emulated.*).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "attacks/defenses/common.h"
#include "attacks/objectives.h"
#include "attacks/pgd.h"
#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/common/device_counters.h"
#include "losses/distance.h"
#include "models/c2f2.h"
#include "tests/defenses/tiny_model.h"
#include "tests/support/cuda_guard.h"

using engine::Device;
using engine::Tensor;

namespace {

// Sets the attack loop for one scope and restores eager (the default) after it.
struct AttackLoopScope {
  explicit AttackLoopScope(engine::AttackLoop loop) { engine::set_attack_loop(loop); }
  ~AttackLoopScope() { engine::set_attack_loop(engine::AttackLoop::Eager); }
};

// A model in eval mode on CUDA, images with pixels in [0.2, 0.8] and their clean embeddings. C2F2
// (an 8-wide embedding, one 28x28 image: about 2 s a pass on the emulator) for the bit-for-bit
// checks; defense_test's TinyEmbedder (Linear 16 -> 4, four 4x4 images: microseconds) where the
// test runs many attacks (the stop rule, the allocation counts), which do not depend on the model.
struct Setup {
  engine::Generator gen{2032};
  std::shared_ptr<models::Model> model;
  Tensor images;
  Tensor clean;
  explicit Setup(bool c2f2) {
    if (c2f2) {
      model = std::make_shared<models::C2F2>(models::C2F2Options{8}, gen);
      images = engine::uniform({1, 1, 28, 28}, 0.2, 0.8, gen);
    } else {
      model = std::make_shared<defense_test::TinyEmbedder>(gen, 0, engine::DType::F32);
      images = engine::uniform({4, 1, 4, 4}, 0.2, 0.8, gen);
    }
    model->to(Device::cuda());
    model->eval();
    images = images.to(Device::cuda());
    engine::NoGradGuard no_grad;
    clean = (*model)(images).detach();
  }
  // Moves the embeddings away from the clean ones (embedding shift), with a different reference
  // at step 0, as the ES objectives have.
  attacks::Objective objective() {
    const Tensor first = clean * 1.01;
    return [this, first](const Tensor& x, int64_t step) {
      return attacks::embedding_shift_loss((*model)(x), step == 0 ? first : clean,
                                           losses::Metric::E);
    };
  }
};

struct Run {
  std::vector<double> adversarial, objective, max_delta;
  int64_t steps = 0;
};

Run run(engine::AttackLoop loop, Setup& s, const attacks::PgdOptions& options) {
  AttackLoopScope scope(loop);
  attacks::PgdTrace trace;
  const Tensor adversarial = attacks::pgd_attack(s.images, s.objective(), options, &trace);
  return {adversarial.to_vector(), trace.objective_values(), trace.max_delta_values(), trace.steps};
}

void check_same_bits(const Run& eager, const Run& captured) {
  CHECK(captured.steps == eager.steps);
  CHECK(captured.objective == eager.objective);
  CHECK(captured.max_delta == eager.max_delta);
  CHECK(captured.adversarial == eager.adversarial);
}

attacks::PgdOptions options(int64_t steps, double stop_tolerance = 0.0) {
  attacks::PgdOptions o;
  o.eps = 0.05;
  o.alpha = 0.01;
  o.steps = steps;
  o.stop_tolerance = stop_tolerance;
  return o;
}

}  // namespace

TEST_CASE("captured PGD gives the eager loop's bits on C2F2", "[pgd_captured][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Setup s(true);
  const Run eager = run(engine::AttackLoop::Eager, s, options(3));
  REQUIRE(eager.steps == 3);
  const Run captured = run(engine::AttackLoop::Captured, s, options(3));
  check_same_bits(eager, captured);
  CHECK(eager.adversarial != s.images.to_vector());  // the attack moved the images
}

TEST_CASE("captured PGD stops where the eager loop stops", "[pgd_captured][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Setup s(false);
  // The objective's moves, from the eager trace: |obj_t - obj_{t-1}| (obj_{-1} = -1).
  const Run full = run(engine::AttackLoop::Eager, s, options(10));
  std::vector<double> moves;
  for (std::size_t t = 0; t < full.objective.size(); ++t) {
    moves.push_back(std::fabs(full.objective[t] - (t == 0 ? -1.0 : full.objective[t - 1])));
  }
  // Tolerances just above each step's move stop at that step or before, in every position of the
  // captured loop's check windows of 4; a huge one stops at step 0, 0 never stops.
  std::vector<double> tolerances = {1e9, 0.0};
  for (double move : moves) tolerances.push_back(move * 1.001);
  std::set<int64_t> stops;
  for (double tolerance : tolerances) {
    INFO("tolerance " << tolerance);
    const Run eager = run(engine::AttackLoop::Eager, s, options(10, tolerance));
    const Run captured = run(engine::AttackLoop::Captured, s, options(10, tolerance));
    check_same_bits(eager, captured);
    if (tolerance == 1e9) CHECK(eager.steps == 1);
    if (tolerance == 0.0) CHECK(eager.steps == 10);
    stops.insert(eager.steps);
  }
  CHECK(stops.size() >= 3);  // stops at several different steps were compared
}

TEST_CASE("captured PGD: the replayed steps allocate nothing", "[pgd_captured][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Setup s(false);
  // Allocations of a whole attack of 3 and of 7 steps, after one of each to warm the cache: the
  // captured loop's 4 extra steps are replays and allocate nothing; the eager loop's allocate.
  auto allocations_of = [&](engine::AttackLoop loop, int64_t steps) {
    run(loop, s, options(steps));
    const engine::AllocatorStats before = engine::allocator_stats(Device::cuda());
    const int64_t mallocs_before = engine::kernels::device_counters().device_allocations;
    run(loop, s, options(steps));
    const engine::AllocatorStats after = engine::allocator_stats(Device::cuda());
    // warm: no cudaMalloc at all
    CHECK(engine::kernels::device_counters().device_allocations == mallocs_before);
    return after.allocations - before.allocations;
  };
  const int64_t captured_3 = allocations_of(engine::AttackLoop::Captured, 3);
  const int64_t captured_7 = allocations_of(engine::AttackLoop::Captured, 7);
  // (The loop's buffers are one set per attack whatever the steps: the trace's values and deltas
  // are one tensor each.)
  CHECK(captured_7 == captured_3);
  CHECK(allocations_of(engine::AttackLoop::Eager, 7) >
        allocations_of(engine::AttackLoop::Eager, 3));
}

TEST_CASE("captured PGD: a host synchronization inside the step is an error",
          "[pgd_captured][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Setup s(false);
  AttackLoopScope scope(engine::AttackLoop::Captured);
  const attacks::Objective reads_the_host = [&](const Tensor& x, int64_t step) {
    const Tensor loss = attacks::embedding_shift_loss((*s.model)(x), s.clean, losses::Metric::E);
    if (step > 0 && loss.item() > 1e30) return loss * 2.0;  // a host round trip in the step
    return loss;
  };
  REQUIRE_THROWS_WITH(attacks::pgd_attack(s.images, reads_the_host, options(3)),
                      Catch::Contains("not permitted when stream is capturing"));
  // The eager loop runs it (one synchronization per step, allowed there).
  engine::set_attack_loop(engine::AttackLoop::Eager);
  CHECK(attacks::pgd_attack(s.images, reads_the_host, options(3)).defined());
}

TEST_CASE("captured PGD: EST's inner adversary gives the eager bits", "[pgd_captured][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Setup s(true);
  auto adversary = [&](engine::AttackLoop loop) {
    AttackLoopScope scope(loop);
    engine::Generator mining(77);  // the recipe's mining stream: the 1e-7 offsets' signs
    attacks::PgdTrace trace;
    const Tensor adversarial = attacks::defenses::embedding_shift_adversary(
        *s.model, s.images, s.clean, losses::Metric::N, options(3), mining, &trace);
    return Run{adversarial.to_vector(), trace.objective_values(), trace.max_delta_values(),
               trace.steps};
  };
  const Run eager = adversary(engine::AttackLoop::Eager);
  check_same_bits(eager, adversary(engine::AttackLoop::Captured));
}
