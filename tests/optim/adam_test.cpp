// Adam and AdamW: PyTorch's update rule checked on a hand-computed three-step case.
//
// Setup: p0 = (1, -2), g1 = (0.5, -1), g2 = (0.25, 0.5), g3 = (-1, 2), lr = 0.1, betas
// (0.9, 0.999), eps = 1e-8. Bias corrections: 1 - 0.9^t = 0.1, 0.19, 0.271 and
// 1 - 0.999^t = 0.001, 0.001999, 0.002997001 for t = 1, 2, 3. Worked out with a calculator from
//   m = 0.9 m + 0.1 g;  v = 0.999 v + 0.001 g^2;  p -= lr (m / bc1) / (sqrt(v / bc2) + eps).
#include <omp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/optim/adam.h"
#include "kernels/optim/optim.h"
#include "tests/support/allclose.h"

using engine::DType;
using engine::Tensor;
using engine::optim::Adam;
using engine::optim::AdamOptions;
using engine::optim::AdamW;

namespace {

const std::vector<std::vector<double>> kGrads = {{0.5, -1.0}, {0.25, 0.5}, {-1.0, 2.0}};

struct Step {
  std::vector<double> param, exp_avg, exp_avg_sq;
};

template <typename Optimizer>
std::vector<Step> run_three_steps(const AdamOptions& options) {
  Tensor p = Tensor::from_vector({1.0, -2.0}, {2}, DType::F64);
  p.set_requires_grad(true);
  Optimizer adam({p}, options);
  std::vector<Step> steps;
  for (const auto& g : kGrads) {
    p.set_grad(Tensor::from_vector(g, {2}, DType::F64));
    adam.step();
    auto state = adam.state_dict();
    steps.push_back({p.to_vector(), state.at("state.0.exp_avg").to_vector(),
                     state.at("state.0.exp_avg_sq").to_vector()});
  }
  return steps;
}

void require_step(const Step& actual, const Step& expected, int t) {
  std::string step = " after step " + std::to_string(t);
  test::require_close(actual.exp_avg, expected.exp_avg, 1e-15, 1e-12, "m" + step);
  test::require_close(actual.exp_avg_sq, expected.exp_avg_sq, 1e-15, 1e-12, "v" + step);
  test::require_close(actual.param, expected.param, 1e-12, 1e-12, "p" + step);
}

AdamOptions options_with(double weight_decay) {
  AdamOptions options;
  options.lr = 0.1;
  options.weight_decay = weight_decay;
  return options;
}

}  // namespace

TEST_CASE("adam: three steps without weight decay", "[adam]") {
  auto steps = run_three_steps<Adam>(options_with(0.0));
  // t=1: m = (0.05, -0.1), v = (0.00025, 0.001); m^ = g1, sqrt(v^) = |g1|, so each coordinate
  //      moves by lr |g|/(|g| + eps): p1 = (1 - 0.1 * 0.5/(0.5 + 1e-8), -2 + 0.1 * 1/(1 + 1e-8))
  //      = (0.900000002, -1.900000001).
  require_step(steps[0], {{0.900000002, -1.900000001}, {0.05, -0.1}, {0.00025, 0.001}}, 1);
  // t=2: m = (0.045 + 0.025, -0.09 + 0.05) = (0.07, -0.04);
  //      v = (0.00024975 + 0.0000625, 0.000999 + 0.00025) = (0.00031225, 0.001249);
  //      m^ = (0.368421052632, -0.210526315789), sqrt(v^) = (0.395225380702, 0.790450761403);
  //      update = (0.093217961523, -0.026633703629); p2 = (0.806782040477, -1.873366297371).
  require_step(steps[1],
               {{0.8067820404774624, -1.873366297370903}, {0.07, -0.04}, {0.00031225, 0.001249}},
               2);
  // t=3: m = (0.063 - 0.1, -0.036 + 0.2) = (-0.037, 0.164);
  //      v = (0.00031193775 + 0.001, 0.001247751 + 0.004) = (0.00131193775, 0.005247751);
  //      m^ = (-0.136531365314, 0.605166051661), sqrt(v^) = (0.661626924788, 1.323253849576);
  //      update = (-0.020635702408, 0.045733178655); p3 = (0.827417742885, -1.919099476026).
  require_step(
      steps[2],
      {{0.8274177428854115, -1.9190994760260234}, {-0.037, 0.164}, {0.00131193775, 0.005247751}},
      3);
}

TEST_CASE("adam: weight decay is an L2 term added to the gradient", "[adam]") {
  auto steps = run_three_steps<Adam>(options_with(0.1));
  // t=1: g = g1 + 0.1 p0 = (0.6, -1.2); m = (0.06, -0.12), v = (0.00036, 0.00144);
  //      p1 = (1 - 0.1 * 0.6/(0.6 + 1e-8), -2 + 0.1 * 1.2/(1.2 + 1e-8))
  //         = (0.900000001667, -1.900000000833).
  require_step(steps[0],
               {{0.9000000016666666, -1.9000000008333333}, {0.06, -0.12}, {0.00036, 0.00144}}, 1);
  // t=2: g = (0.25 + 0.09000000016667, 0.5 - 0.19000000008333) = (0.340000000167, 0.309999999917)
  //      m = (0.054 + 0.034000000017, -0.108 + 0.030999999992) = (0.088000000017, -0.077000000008)
  //      v = (0.00035964 + 0.00011560000011, 0.00143856 + 0.0000960999999) =
  //          (0.00047524000011, 0.00153465999995)
  //      m^ = (0.463157894825, -0.405263157939), sqrt(v^) = (0.487584730577, 0.876192819477)
  //      update = (0.094990235805, -0.046252736191); p2 = (0.805009765861, -1.853747264643).
  require_step(steps[1],
               {{0.8050097658613199, -1.8537472646427609},
                {0.08800000001666666, -0.07700000000833333},
                {0.0004752400001133333, 0.0015346599999483334}},
               2);
  // t=3: g = (-1 + 0.080500976586, 2 - 0.185374726464) = (-0.919499023414, 1.814625273536)
  //      m = (-0.012749902326, 0.112162527346), v = (0.001320243214, 0.004825990223)
  //      m^ = (-0.047047610060, 0.413883864746), sqrt(v^) = (0.663717896396, 1.268965383355)
  //      update = (-0.007088494917, 0.032615851221); p3 = (0.812098260779, -1.886363115864).
  require_step(steps[2],
               {{0.8120982607786772, -1.88636311586399},
                {-0.012749902326386814, 0.11216252734607238},
                {0.001320243214172277, 0.004825990223302985}},
               3);
}

TEST_CASE("adamw: decoupled weight decay shrinks the parameter first", "[adamw]") {
  auto steps = run_three_steps<AdamW>(options_with(0.1));
  // Moments are those of plain Adam (the gradient is not modified); each step first multiplies
  // p by 1 - lr wd = 0.99, then subtracts the plain-Adam update:
  // t=1: 0.99 p0 = (0.99, -1.98);   p1 = (0.99 - 0.099999998, -1.98 + 0.099999999)
  //                                    = (0.890000002, -1.880000001)
  // t=2: 0.99 p1 = (0.881100002, -1.86120000099); p2 = (0.881100002 - 0.093217961523,
  //      -1.86120000099 + 0.026633703629) = (0.787882040457, -1.834566297361)
  // t=3: 0.99 p2 = (0.780003220053, -1.816220634387); p3 = (0.780003220053 + 0.020635702408,
  //      -1.816220634387 - 0.045733178655) = (0.800638922461, -1.861953813042)
  require_step(steps[0], {{0.890000002, -1.880000001}, {0.05, -0.1}, {0.00025, 0.001}}, 1);
  require_step(steps[1],
               {{0.7878820404574624, -1.8345662973609032}, {0.07, -0.04}, {0.00031225, 0.001249}},
               2);
  require_step(
      steps[2],
      {{0.8006389224608368, -1.8619538130424145}, {-0.037, 0.164}, {0.00131193775, 0.005247751}},
      3);
}

TEST_CASE("adamw: default weight decay is PyTorch's 1e-2", "[adamw]") {
  AdamOptions defaults = AdamW::defaults();
  REQUIRE(defaults.weight_decay == 1e-2);
  REQUIRE(defaults.lr == 1e-3);
  REQUIRE(defaults.decoupled_weight_decay);
}

TEST_CASE("adam: the f32 kernel follows the same three steps", "[adam][kernel]") {
  float p[2] = {1.0f, -2.0f}, m[2] = {0.0f, 0.0f}, v[2] = {0.0f, 0.0f};
  const float expected[3][2] = {
      {0.900000002f, -1.900000001f}, {0.80678204f, -1.8733663f}, {0.82741774f, -1.9190995f}};
  engine::kernels::AdamHyper hyper;
  hyper.lr = 0.1;
  for (int s = 0; s < 3; ++s) {
    float g[2] = {float(kGrads[s][0]), float(kGrads[s][1])};
    hyper.step = s + 1;
    engine::kernels::adam_update_cpu<float>(2, g, hyper, p, m, v);
    REQUIRE(p[0] == Approx(expected[s][0]).epsilon(1e-6));
    REQUIRE(p[1] == Approx(expected[s][1]).epsilon(1e-6));
  }
}

TEST_CASE("adam and sgd kernels: the same bits on one thread and on four", "[adam][sgd][kernel]") {
  // Large enough for the OpenMP loop (>= 2^16 elements); elementwise updates, so the split over
  // threads must not change a single bit. Two steps, so the moment buffers are read back too.
  const int64_t n = (int64_t(1) << 17) + 3;
  auto run = [n](int threads) {
    std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f), q(n), b(n, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      p[i] = q[i] = std::sin(0.001f * float(i));
      g[i] = std::cos(0.003f * float(i)) - 0.25f;
    }
    engine::kernels::AdamHyper adam;
    adam.lr = 0.01;
    adam.weight_decay = 1e-4;
    engine::kernels::SgdHyper sgd;
    sgd.lr = 0.05;
    sgd.momentum = 0.9;
    sgd.nesterov = true;
    sgd.weight_decay = 1e-4;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    for (int s = 1; s <= 2; ++s) {
      adam.step = s;
      engine::kernels::adam_update_cpu<float>(n, g.data(), adam, p.data(), m.data(), v.data());
      sgd.first_step = s == 1;
      engine::kernels::sgd_update_cpu<float>(n, g.data(), sgd, q.data(), b.data());
    }
    omp_set_num_threads(saved);
    return std::vector<std::vector<float>>{p, m, v, q, b};
  };
  const auto one = run(1), four = run(4);
  for (size_t k = 0; k < one.size(); ++k) CHECK(one[k] == four[k]);
  CHECK(one[0] != std::vector<float>(n, 0.0f));  // the updates ran
}

TEST_CASE("adam: invalid hyperparameters are rejected", "[adam]") {
  Tensor p = Tensor::zeros({2}, DType::F64);
  p.set_requires_grad(true);
  AdamOptions options;
  options.beta1 = 1.0;
  REQUIRE_THROWS_WITH(Adam({p}, options), Catch::Contains("adam") && Catch::Contains("beta1"));
  options = AdamOptions();
  options.eps = -1.0;
  REQUIRE_THROWS_WITH(Adam({p}, options), Catch::Contains("adam") && Catch::Contains("eps"));
}
