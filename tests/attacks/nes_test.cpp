// The NES black-box attack (attacks/nes.h) and the transfer attack
// (attacks::transfer_attack_batch): the estimator on a linear loss worked by hand, that NES never
// takes an input gradient, its query count, that it moves a tiny model's ranking as PGD does, and
// that a transfer attack from a model onto itself is the white-box attack.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "attacks/nes.h"
#include "attacks/whitebox_comparison.h"
#include "engine/autograd.h"
#include "engine/nn/linear.h"
#include "engine/ops.h"
#include "engine/random.h"

namespace {

using engine::Tensor;

// A linear embedding of 1x4x4 images into D = 4 (as tests/attacks/attack_test.cpp) that counts the
// images it embeds: the model queries.
class CountingModel : public models::Model {
 public:
  explicit CountingModel(uint64_t seed) : Model("tiny", 4, 1, {1, 4, 4}) {
    engine::Generator gen(seed);
    fc_ = register_module("fc", std::make_shared<engine::nn::Linear>(16, 4, true, gen));
  }
  Tensor forward(const Tensor& x) override {
    images_embedded += x.size(0);
    return fc_->forward(x.flatten(1));
  }
  int64_t images_embedded = 0;

 private:
  std::shared_ptr<engine::nn::Linear> fc_;
};

struct Split {
  Tensor images;  // 400 images, 4 classes of 100; the first 6 attacked
  std::vector<int64_t> labels;
  Split() {
    engine::Generator data_gen(11);
    images = engine::uniform({400, 1, 4, 4}, 0.0, 1.0, data_gen);
    for (int64_t i = 0; i < 400; ++i) labels.push_back(i % 4);
  }
  Tensor batch() const { return images.slice(0, 0, 6); }
  std::vector<int64_t> batch_labels() const { return {labels.begin(), labels.begin() + 6}; }
};

const std::vector<int64_t> kSelf = {0, 1, 2, 3, 4, 5};

double mean(const std::vector<double>& v) {
  double total = 0.0;
  for (double x : v) total += x;
  return total / static_cast<double>(v.size());
}

// Per image the linear loss L_b(x) = sum_k w_k x_bk, w = (1, -1, 2, -2, 1, -1, 2, -2, ...).
std::vector<double> linear_weights() {
  std::vector<double> w;
  for (int k = 0; k < 16; ++k) w.push_back((k % 4 < 2 ? 1.0 : 2.0) * (k % 2 == 0 ? 1.0 : -1.0));
  return w;
}
attacks::RowLoss linear_loss() {
  const Tensor w = Tensor::from_vector(linear_weights(), {1, 16});
  return [w](const Tensor& points, int64_t) { return engine::sum(points.flatten(1) * w, {1}); };
}

}  // namespace

TEST_CASE("NES with one antithetic pair is (w.p) p / sigma for a linear loss", "[attacks][nes]") {
  // x = x0 = 0.5 everywhere and every offset clamped to eps = 0.3: the points x +- p stay inside
  // the ball and [0, 1], so L(q+) - L(q-) = 2 w.p and g = (2 w.p) p / (2 sigma).
  const Tensor x = Tensor::full({1, 1, 4, 4}, 0.5);
  attacks::NesOptions options;
  options.population = 2;
  engine::Generator gen(5);
  engine::Generator same_draws = gen;
  const Tensor g = attacks::nes_gradient(x, x, linear_loss(), 0, 0.3, options, gen);
  const double sigma = 0.6;  // 2 eps
  const std::vector<double> p =
      engine::clamp(engine::normal({1, 1, 4, 4}, 0.0, sigma, same_draws), -0.3, 0.3).to_vector();
  const std::vector<double> w = linear_weights();
  double wp = 0.0;
  for (int k = 0; k < 16; ++k) wp += w[k] * p[k];
  const std::vector<double> got = g.to_vector();
  for (int k = 0; k < 16; ++k) CHECK(got[k] == Approx(wp * p[k] / sigma).margin(1e-5));
}

TEST_CASE("NES's estimate of a linear loss's gradient tends to sigma E[clamp(z, -1/2, 1/2)^2] w",
          "[attacks][nes]") {
  // With sigma = 2 eps each offset coordinate is sigma * clamp(z, -1/2, 1/2), z ~ N(0, 1), and
  // E[g] = E[p p^T] w / sigma = sigma c w with c = E[min(z^2, 1/4)]
  //   = (P(|z| < 1/2) - 2 (1/2) phi(1/2)) + (1/4) P(|z| > 1/2)
  //   = (0.382925 - 0.352065) + 0.25 * 0.617075 = 0.185129,
  // so E[g] = 0.6 * 0.185129 w = 0.111077 w. 20,000 pairs: the standard error is about 0.005.
  const Tensor x = Tensor::full({1, 1, 4, 4}, 0.5);
  attacks::NesOptions options;
  options.population = 40000;
  engine::Generator gen(9);
  double mean_loss = 0.0;
  const std::vector<double> g =
      attacks::nes_gradient(x, x, linear_loss(), 0, 0.3, options, gen, &mean_loss).to_vector();
  const std::vector<double> w = linear_weights();
  for (int k = 0; k < 16; ++k) {
    INFO("coordinate " << k);
    CHECK(g[k] == Approx(0.111077 * w[k]).margin(0.03));
  }
  // The mean population loss: L(x + p) + L(x - p) = 2 L(x) = 2 * 0.5 * sum(w) = 0 per pair.
  CHECK(mean_loss == Approx(0.0).margin(1e-3));
}

TEST_CASE("NES steps by alpha against the estimated sign and stays in the eps-ball",
          "[attacks][nes]") {
  // A linear loss with 200 samples per step: the estimate's signs are w's, so every pixel moves
  // by alpha = 0.05 per step against sign(w) until it meets eps = 0.12 (two steps, then clipped).
  const Tensor x = Tensor::full({2, 1, 4, 4}, 0.5);
  attacks::PgdOptions pgd;
  pgd.eps = 0.12;
  pgd.alpha = 0.05;
  pgd.steps = 3;
  attacks::NesOptions options;
  options.population = 2000;
  engine::Generator gen(4);
  attacks::NesTrace trace;
  const std::vector<double> adv =
      attacks::nes_attack(x, linear_loss(), pgd, options, gen, &trace).to_vector();
  const std::vector<double> w = linear_weights();
  for (size_t i = 0; i < adv.size(); ++i) {
    CHECK(adv[i] == Approx(0.5 - 0.12 * (w[i % 16] > 0 ? 1.0 : -1.0)).margin(1e-6));
  }
  CHECK(trace.steps == 3);
  CHECK(trace.queries_per_image == 6000);
  CHECK(trace.objective.size() == 3);
}

TEST_CASE("NES takes no gradient and queries the model population x steps times per image",
          "[attacks][nes]") {
  Split split;
  auto model = std::make_shared<CountingModel>(7);
  const attacks::Gallery gallery =
      attacks::make_gallery(*model, split.images, split.labels, losses::Metric::N);
  for (const char* kind : {"CA:pm=+:W=2", "QA:pm=-:M=1", "SPQA:pm=+:M=1:G=2:zeta=4e4", "TMA", "ES",
                           "LTM", "GTM", "GTT", "STAX", "MTAX:T=2"}) {
    INFO(kind);
    const attacks::AttackSpec spec =
        attacks::parse_attack_spec(std::string(kind) + ":eps=0.2:alpha=0.02:nes=10:queries=40");
    CHECK(spec.pgd.steps == 4);
    model->images_embedded = 0;
    engine::Generator gen(3);
    engine::GradTrace trace;
    const attacks::BatchResult r = attacks::attack_batch(
        *model, split.batch(), split.batch_labels(), kSelf, gallery, spec, gen);
    CHECK(trace.computed().empty());  // not one backward function ran
    CHECK(r.queries_per_image == 40);
    // 6 clean images, 40 queries for each, 6 adversarial images measured.
    CHECK(model->images_embedded == 6 + 40 * 6 + 6);
    CHECK(r.perturbation.max_delta <= 0.2 + 1e-6);
    CHECK(r.objective.size() == 4);
  }
}

TEST_CASE("NES with enough samples moves the ranking as PGD does", "[attacks][nes]") {
  Split split;
  auto model = std::make_shared<CountingModel>(7);
  const attacks::Gallery gallery =
      attacks::make_gallery(*model, split.images, split.labels, losses::Metric::N);
  for (const char* kind : {"QA:pm=+:M=1", "CA:pm=+:W=1"}) {
    INFO(kind);
    const std::string base = std::string(kind) + ":eps=0.3:alpha=0.02:pgditer=16";
    engine::Generator white_gen(3), black_gen(3);
    const attacks::BatchResult white =
        attacks::attack_batch(*model, split.batch(), split.batch_labels(), kSelf, gallery,
                              attacks::parse_attack_spec(base), white_gen);
    const attacks::BatchResult black =
        attacks::attack_batch(*model, split.batch(), split.batch_labels(), kSelf, gallery,
                              attacks::parse_attack_spec(base + ":nes=200"), black_gen);
    const double clean = mean(white.clean[0].second);
    CHECK(mean(black.clean[0].second) == clean);  // the same selection
    const double white_adv = mean(white.adversarial[0].second);
    const double black_adv = mean(black.adversarial[0].second);
    INFO("clean " << clean << " white-box " << white_adv << " NES " << black_adv);
    // Both raise the rank (lower the percentile); NES gets at least half of PGD's way.
    CHECK(white_adv < clean - 10.0);
    CHECK(clean - black_adv >= 0.5 * (clean - white_adv));
  }
}

TEST_CASE("A transfer attack from a model onto itself is the white-box attack", "[attacks][nes]") {
  Split split;
  auto target = std::make_shared<CountingModel>(7);
  auto same = std::make_shared<CountingModel>(7);   // same weights, another object
  auto other = std::make_shared<CountingModel>(8);  // another model
  const attacks::Gallery target_gallery =
      attacks::make_gallery(*target, split.images, split.labels, losses::Metric::N);
  const attacks::Gallery same_gallery =
      attacks::make_gallery(*same, split.images, split.labels, losses::Metric::N);
  const attacks::Gallery other_gallery =
      attacks::make_gallery(*other, split.images, split.labels, losses::Metric::N);
  for (const char* kind : {"CA:pm=-:W=2", "QA:pm=+:M=2", "TMA", "ES", "GTM", "GTT", "LTM"}) {
    INFO(kind);
    const attacks::AttackSpec spec =
        attacks::parse_attack_spec(std::string(kind) + ":eps=0.2:alpha=0.02:pgditer=5");
    engine::Generator g1(3), g2(3), g3(3);
    const attacks::BatchResult white = attacks::attack_batch(
        *target, split.batch(), split.batch_labels(), kSelf, target_gallery, spec, g1);
    const attacks::BatchResult self =
        attacks::transfer_attack_batch(*same, same_gallery, *target, target_gallery, split.batch(),
                                       split.batch_labels(), kSelf, spec, g2);
    const attacks::BatchResult transfer =
        attacks::transfer_attack_batch(*other, other_gallery, *target, target_gallery,
                                       split.batch(), split.batch_labels(), kSelf, spec, g3);
    CHECK(self.adversarial_images.to_vector() == white.adversarial_images.to_vector());
    CHECK(self.adversarial == white.adversarial);
    CHECK(self.clean == white.clean);
    CHECK(g2.offset == g1.offset);  // the stream advanced as the white-box attack's
    // From another model: the target's selection and clean measures, another perturbation.
    CHECK(transfer.clean == white.clean);
    CHECK(transfer.adversarial_images.to_vector() != white.adversarial_images.to_vector());
    CHECK(transfer.perturbation.max_delta <= 0.2 + 1e-6);
    for (const auto& [name, values] : transfer.adversarial) {
      for (double v : values) CHECK(std::isfinite(v));
    }
  }
}

TEST_CASE("NES spec keys: nes, queries, sigma", "[attacks][nes]") {
  const attacks::AttackSpec spec =
      attacks::parse_attack_spec("CA:pm=+:eps=0.1:alpha=0.01:nes=100:queries=3200:sigma=0.05");
  CHECK(spec.nes.population == 100);
  CHECK(spec.pgd.steps == 32);
  CHECK(spec.nes.sigma == 0.05);
  CHECK(attacks::attack_spec_string(spec) ==
        "CA:pm=+:W=1:eps=0.1:alpha=0.01:pgditer=32:nes=100:sigma=0.05");
  CHECK(attacks::attack_spec_string(attacks::parse_attack_spec(
            attacks::attack_spec_string(spec))) == attacks::attack_spec_string(spec));
  // A white-box spec prints as before.
  CHECK(attacks::attack_spec_string(attacks::parse_attack_spec("ES:eps=0.1:alpha=0.01")) ==
        "ES:eps=0.1:alpha=0.01:pgditer=24");
  CHECK(attacks::nes_sigma(spec.nes, 0.1) == 0.05);
  CHECK(attacks::nes_sigma(attacks::NesOptions{}, 0.1) == 0.2);
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(attacks::parse_attack_spec("ES:nes=3"), Contains("nes must be even"));
  CHECK_THROWS_WITH(attacks::parse_attack_spec("ES:nes=0"), Contains("nes=0"));
  CHECK_THROWS_WITH(attacks::parse_attack_spec("ES:nes=10:queries=25"),
                    Contains("not a multiple of nes=10"));
  CHECK_THROWS_WITH(attacks::parse_attack_spec("ES:nes=10:queries=20:pgditer=2"),
                    Contains("either pgditer or queries"));
  CHECK_THROWS_WITH(attacks::parse_attack_spec("ES:queries=20"), Contains("NES attack only"));
  CHECK_THROWS_WITH(attacks::parse_attack_spec("ES:sigma=0.1"), Contains("NES attack only"));
  CHECK_THROWS_WITH(attacks::parse_attack_spec("ES:nes=10:sigma=0"), Contains("sigma must be > 0"));
}

namespace {

// A planted gradient mask: the input is binarized (0.5 + 0.5 sign(x - 0.5)) before the linear
// embedding, so the input gradient is zero everywhere and PGD cannot move, while the model's
// ranking still changes when pixels cross 0.5.
class BinarizingModel : public models::Model {
 public:
  explicit BinarizingModel(uint64_t seed) : Model("binarizing", 4, 1, {1, 4, 4}) {
    engine::Generator gen(seed);
    fc_ = register_module("fc", std::make_shared<engine::nn::Linear>(16, 4, true, gen));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor binary = engine::add_scalar(engine::sign(engine::add_scalar(x, -0.5)) * 0.5, 0.5);
    return fc_->forward(binary.flatten(1));
  }

 private:
  std::shared_ptr<engine::nn::Linear> fc_;
};

}  // namespace

TEST_CASE("NES beats PGD on a gradient-masking model, and the comparison flags it",
          "[attacks][nes][masking]") {
  Split split;
  auto model = std::make_shared<BinarizingModel>(7);
  const attacks::Gallery gallery =
      attacks::make_gallery(*model, split.images, split.labels, losses::Metric::N);
  const std::string base = "QA:pm=+:M=1:eps=0.3:alpha=0.05:pgditer=8";
  engine::Generator white_gen(3), black_gen(3);
  const attacks::BatchResult white =
      attacks::attack_batch(*model, split.batch(), split.batch_labels(), kSelf, gallery,
                            attacks::parse_attack_spec(base), white_gen);
  const attacks::BatchResult black =
      attacks::attack_batch(*model, split.batch(), split.batch_labels(), kSelf, gallery,
                            attacks::parse_attack_spec(base + ":nes=100"), black_gen);
  // PGD sees a zero gradient and leaves every image as it was.
  CHECK(white.perturbation.max_delta == 0.0);
  CHECK(white.adversarial == white.clean);
  const double white_adv = mean(white.adversarial[0].second);
  const double black_adv = mean(black.adversarial[0].second);
  INFO("white-box " << white_adv << " NES " << black_adv);
  CHECK(black_adv < white_adv - 1.0);
  const auto comparison = attacks::compare_with_whitebox({"QA+:prank"}, {white_adv}, {black_adv});
  CHECK(attacks::gradient_masking_suspected(comparison));
}
