// The worst case per query (attacks/worst_case.h) and the sanity checks (attacks/sanity.h): the
// break rules, the per-image worst over restarts and the robust fractions on values worked by
// hand; each check's verdict at its threshold; and a planted weakness: a model whose input layer
// binarizes the pixels (sign has a zero gradient everywhere, so PGD cannot move its images),
// which the eps = 1 check flags and random restarts expose, while a smooth model passes.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "attacks/sanity.h"
#include "attacks/worst_case.h"
#include "engine/nn/linear.h"
#include "engine/ops.h"
#include "engine/random.h"

namespace {

using engine::Tensor;

TEST_CASE("worst case: each judged measure's break rule at its threshold", "[attacks][worst]") {
  const attacks::BreakThresholds t;
  struct Case {
    const char* measure;
    double value;
    bool broken;
  };
  // The table of attacks/worst_case.h: "+" ranks below 1 %, "-" ranks at 50 % or more, TMA's
  // cosine and ES's shift at 0.5 and 1 or more, a hit (100) kept and a miss (0) broken.
  const Case cases[] = {
      {"CA+:prank", 0.99, true},   {"CA+:prank", 1.0, false},     {"QA+:prank", 0.0, true},
      {"SPQA+:prank", 1.5, false}, {"CA-:prank", 50.0, true},     {"QA-:prank", 49.9, false},
      {"SPQA-:prank", 75.0, true}, {"TMA:cosine", 0.5, true},     {"TMA:cosine", 0.49, false},
      {"ES:D", 1.0, true},         {"ES:D", 0.999, false},        {"ES:R", 0.0, true},
      {"LTM:r@1", 100.0, false},   {"GTM:r@1", 0.0, true},        {"MTAX:r@1", 0.0, true},
      {"GTT:retain@4", 0.0, true}, {"GTT:retain@4", 100.0, false}};
  for (const Case& c : cases) {
    INFO(c.measure << " " << c.value);
    const std::optional<attacks::BreakRule> rule = attacks::break_rule(c.measure, t);
    REQUIRE(rule.has_value());
    CHECK(attacks::is_broken(*rule, c.value) == c.broken);
  }
  for (const char* unjudged : {"SPQA+:GTprank", "STAX:sqdist", "MTAX:sqdist", "GTT:retain@1"}) {
    INFO(unjudged);
    CHECK_FALSE(attacks::break_rule(unjudged, t).has_value());
  }
  CHECK(attacks::attack_family("QA-") == "rank");
  CHECK(attacks::attack_family("SPQA+") == "rank");
  CHECK(attacks::attack_family("ES") == "embedding");
  CHECK(attacks::attack_family("GTT") == "top-1");
}

TEST_CASE("worst case: per-image worst over restarts and the robust fractions, by hand",
          "[attacks][worst]") {
  attacks::WorstCaseTable table(4);
  const std::string qa = "QA:pm=+:M=1:eps=0.3:alpha=0.01:pgditer=8";
  const std::string gtm = "GTM:eps=0.3:alpha=0.01:pgditer=8";
  // QA+ (broken below 1 %): restart 0, then two restarts; STAX:sqdist is not judged.
  table.add(qa, "QA+", 0, 0, {{"QA+:prank", {0.5, 30.0, 80.0, 2.0}}});
  table.add(qa, "QA+", 1, 0, {{"QA+:prank", {10.0, 0.2, 90.0, 3.0}}});
  table.add(qa, "QA+", 2, 0, {{"QA+:prank", {20.0, 40.0, 0.9, 1.5}}});
  table.finish_restart(qa, 2);
  // GTM (a miss is broken), images added in two batches of two.
  table.add(gtm, "GTM", 0, 0, {{"GTM:r@1", {100.0, 100.0}}, {"STAX:sqdist", {1.0, 2.0}}});
  table.add(gtm, "GTM", 0, 2, {{"GTM:r@1", {0.0, 100.0}}});
  table.add(gtm, "GTM", 1, 0, {{"GTM:r@1", {100.0, 100.0, 100.0, 0.0}}});
  table.finish_restart(gtm, 1);
  REQUIRE(table.measures().size() == 2);
  CHECK(table.restarts_done(qa) == 2);
  CHECK(table.restarts_done(gtm) == 1);

  const attacks::WorstCaseMeasure& q = table.measures()[0];
  // Worst over restarts 1, 2: min(10, 20), min(0.2, 40), min(90, 0.9), min(3, 1.5).
  CHECK(q.restarts == std::vector<double>{10.0, 0.2, 0.9, 1.5});
  // Over restart 0 too: 0.5, 0.2, 0.9, 1.5; mean 3.1 / 4. Restart 0 alone: 112.5 / 4.
  CHECK(attacks::WorstCaseTable::worst_mean(q) == Approx(0.775));
  CHECK(attacks::WorstCaseTable::single_mean(q) == Approx(28.125));

  // QA+ breaks image 0 in restart 0, images 1 and 2 in the restarts; GTM image 2 in restart 0,
  // image 3 in restart 1.
  const attacks::RobustFractions qa_only = table.robust_fractions(table.select(qa));
  CHECK(qa_only.single == 0.75);
  CHECK(qa_only.restarts == 0.5);
  CHECK(qa_only.worst == 0.25);
  const attacks::RobustFractions top1 = table.robust_fractions(table.select("top-1"));
  CHECK(top1.single == 0.75);
  CHECK(top1.restarts == 0.75);
  CHECK(top1.worst == 0.5);
  // All: restart 0 breaks {0, 2}, the restarts {1, 2, 3}, together every image.
  const attacks::RobustFractions all = table.robust_fractions(table.select());
  CHECK(all.single == 0.5);
  CHECK(all.restarts == 0.25);
  CHECK(all.worst == 0.0);
  CHECK(table.select("rank").size() == 1);
  CHECK(table.select("embedding").empty());
}

TEST_CASE("worst case: a restart's random start draws nothing from the batch's generator",
          "[attacks][worst]") {
  attacks::PgdOptions pgd;
  pgd.eps = 0.3;
  engine::Generator gen(5);
  gen.take(3);
  const attacks::PgdOptions r1 = attacks::restart_pgd_options(pgd, gen, 1);
  const attacks::PgdOptions r2 = attacks::restart_pgd_options(pgd, gen, 2);
  CHECK(gen.offset == 3);  // untouched: later batches select what restart 0 selected
  CHECK(r1.random_start);
  CHECK(r1.seed != r2.seed);
  CHECK(attacks::restart_pgd_options(pgd, gen, 1).seed == r1.seed);  // reproducible
  gen.take(1);  // the next batch: another seed for the same restart
  CHECK(attacks::restart_pgd_options(pgd, gen, 1).seed != r1.seed);
  // A spec with rinit=1: restart 0 takes one block per batch (seeded), and so does every restart,
  // with another seed than restart 0's.
  pgd.random_start = true;
  engine::Generator same(5), restarted(5);
  same.take(3);
  restarted.take(3);
  const uint64_t restart0 = attacks::seeded(pgd, same).seed;
  CHECK(attacks::restart_pgd_options(pgd, restarted, 1).seed != restart0);
  CHECK(restarted.offset == same.offset);
  CHECK(restarted.offset == 4);
  CHECK_THROWS(attacks::restart_pgd_options(pgd, gen, 0));
}

TEST_CASE("sanity checks: each verdict at its threshold", "[attacks][sanity]") {
  CHECK(attacks::check_epsilon_one_breaks(0.10).passed);
  CHECK_FALSE(attacks::check_epsilon_one_breaks(0.1001).passed);
  CHECK(attacks::check_epsilon_one_breaks(0.10).checked);
  // More effort may find more (lower), never 2 points less.
  CHECK(attacks::check_more_effort_not_weaker(0.50, 0.30).passed);
  CHECK(attacks::check_more_effort_not_weaker(0.50, 0.52).passed);
  CHECK_FALSE(attacks::check_more_effort_not_weaker(0.50, 0.5201).passed);
  // Collapsed: NMI below 0.1, or pi_ratio undefined or at least 1.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(attacks::check_not_collapsed(0.60, 0.40).passed);
  CHECK(attacks::check_not_collapsed(0.10, 0.99).passed);
  CHECK_FALSE(attacks::check_not_collapsed(0.09, 0.40).passed);
  CHECK_FALSE(attacks::check_not_collapsed(0.60, 1.00).passed);
  CHECK_FALSE(attacks::check_not_collapsed(0.60, nan).passed);
  CHECK_FALSE(attacks::check_not_collapsed(nan, 0.40).passed);
  attacks::SanityReport report;
  CHECK(report.trusted());         // nothing checked
  report.blackbox.passed = false;  // not checked: does not count
  CHECK(report.trusted());
  report.collapse = attacks::check_not_collapsed(0.0, nan);
  CHECK_FALSE(report.trusted());
}

// 1x4x4 images of 4 classes: each class a pattern of pixels 0.2 or 0.8, plus noise in
// (-0.15, 0.15). `binarize` puts a non-differentiable quantizer in front of the linear embedding:
// (sign(x - 0.5) + 1) / 2, whose input gradient is zero everywhere.
class PatternModel : public models::Model {
 public:
  PatternModel(engine::Generator& gen, bool binarize)
      : Model("pattern", 4, 1, {1, 4, 4}), binarize_(binarize) {
    fc_ = register_module("fc", std::make_shared<engine::nn::Linear>(16, 4, true, gen));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor input = binarize_ ? (engine::sign(x - 0.5) + 1.0) * 0.5 : x;
    return fc_->forward(input.flatten(1));
  }

 private:
  bool binarize_;
  std::shared_ptr<engine::nn::Linear> fc_;
};

struct PatternData {
  Tensor images;  // 200 images, 50 per class
  std::vector<int64_t> labels;
  PatternData() {
    engine::Generator gen(21);
    const std::vector<double> noise = engine::uniform({200, 16}, -0.15, 0.15, gen).to_vector();
    const std::vector<double> bits = engine::uniform({4, 16}, 0.0, 1.0, gen).to_vector();
    std::vector<double> pixels;
    for (int64_t i = 0; i < 200; ++i) {
      labels.push_back(i % 4);
      for (int64_t p = 0; p < 16; ++p) {
        const double level = bits[static_cast<size_t>((i % 4) * 16 + p)] < 0.5 ? 0.2 : 0.8;
        pixels.push_back(level + noise[static_cast<size_t>(i * 16 + p)]);
      }
    }
    images = Tensor::from_vector(pixels, {200, 1, 4, 4});
  }
};

// Robust fractions of `kinds` together (e.g. {"GTM", "ES"}) on the first 32 images over restart 0
// and `restarts` random restarts.
attacks::RobustFractions robustness(models::Model& model, const PatternData& data,
                                    const std::vector<std::string>& kinds,
                                    const std::string& budget, int64_t restarts) {
  const attacks::Gallery gallery =
      attacks::make_gallery(model, data.images, data.labels, losses::Metric::N);
  std::vector<int64_t> self(32);
  for (int64_t i = 0; i < 32; ++i) self[static_cast<size_t>(i)] = i;
  const std::vector<int64_t> labels(data.labels.begin(), data.labels.begin() + 32);
  attacks::WorstCaseTable table(32);
  for (const std::string& kind : kinds) {
    const std::string text = kind + ":" + budget;
    const attacks::AttackSpec spec = attacks::parse_attack_spec(text);
    for (int64_t r = 0; r <= restarts; ++r) {
      attacks::AttackOptions options;
      options.restart = r;
      engine::Generator gen(attacks::attack_stream_seed(9, spec));
      const attacks::BatchResult result = attacks::attack_batch(
          model, data.images.slice(0, 0, 32), labels, self, gallery, spec, gen, options);
      table.add(text, attacks::attack_label(spec), r, 0, result.adversarial);
    }
  }
  return table.robust_fractions(table.select());
}

TEST_CASE(
    "planted weakness: a binarizing input layer masks gradients; eps = 1 flags it, "
    "restarts expose it",
    "[attacks][worst][sanity]") {
  const PatternData data;
  const std::vector<std::string> kEpsOneKinds = {"GTM", "LTM", "TMA", "ES"};
  engine::Generator gen(4);
  PatternModel masked(gen, /*binarize=*/true);
  engine::Generator same(4);
  PatternModel smooth(same, /*binarize=*/false);  // the same weights without the quantizer

  // PGD on the masked model (zero gradient: sign(0) = 0) moves nothing even at eps = 1.
  const attacks::RobustFractions masked_one =
      robustness(masked, data, kEpsOneKinds, "eps=1:alpha=0.078125:pgditer=32", 0);
  const attacks::RobustFractions masked_clean =
      robustness(masked, data, kEpsOneKinds, "eps=0:alpha=0.078125:pgditer=32", 0);
  CHECK(masked_one.single == masked_clean.single);  // nothing moved: the clean robustness
  CHECK(masked_one.single > 0.5);
  CHECK_FALSE(attacks::check_epsilon_one_breaks(masked_one.single).passed);
  // The smooth model at eps = 1 loses (nearly) every top-1: the check passes.
  const attacks::RobustFractions smooth_one =
      robustness(smooth, data, kEpsOneKinds, "eps=1:alpha=0.078125:pgditer=32", 0);
  INFO("smooth at eps = 1: " << smooth_one.single);
  CHECK(attacks::check_epsilon_one_breaks(smooth_one.single).passed);

  // Every class binarizes to one pattern, so the masked model's clean top-1 is always right. At
  // eps = 0.35 the single run still moves nothing on the masked model, but random starts flip
  // pixels across 0.5 (0.2 + 0.15 + 0.35 > 0.5), and restarts break images it called robust.
  const attacks::RobustFractions masked_restarts =
      robustness(masked, data, {"GTM"}, "eps=0.35:alpha=0.011764:pgditer=8", 4);
  CHECK(masked_restarts.single == 1.0);
  CHECK(masked_restarts.worst < 0.9);
  CHECK(masked_restarts.worst <= masked_restarts.restarts);
  CHECK(attacks::check_more_effort_not_weaker(masked_restarts.single, masked_restarts.restarts)
            .passed);
}

}  // namespace
