// Recipe names, option validation, the factory and the stateless recipes' load_state
// (attacks/defenses/defense.h, defense.cpp).
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attacks/defenses/defense.h"
#include "kernels/common/check.h"
#include "tests/defenses/fixture.h"

using attacks::defenses::DefenseOptions;
using Catch::Contains;

TEST_CASE("defense_names lists every recipe in docs order, none first", "[defenses]") {
  CHECK(attacks::defenses::defense_names() ==
        std::vector<std::string>{"none", "est", "rest", "ses", "act", "madry", "hm", "mdprop"});
}

TEST_CASE("needs_triplet_loss: act rest madry hm train on triplet rows themselves", "[defenses]") {
  for (const char* name : {"act", "rest", "madry", "hm"}) {
    INFO(name);
    CHECK(attacks::defenses::needs_triplet_loss(attacks::defenses::parse_recipe(name)));
  }
  for (const char* name : {"none", "est", "ses", "mdprop"}) {
    INFO(name);
    CHECK_FALSE(attacks::defenses::needs_triplet_loss(attacks::defenses::parse_recipe(name)));
  }
}

TEST_CASE("validate accepts the defaults of every recipe and names the bad option otherwise",
          "[defenses]") {
  for (const std::string& name : attacks::defenses::defense_names()) {
    DefenseOptions o;
    o.recipe = attacks::defenses::parse_recipe(name);
    INFO(name);
    CHECK(attacks::defenses::recipe_name(o.recipe) == name);
    CHECK_NOTHROW(attacks::defenses::validate(o));
  }
  DefenseOptions o;
  o.recipe = attacks::defenses::Recipe::Est;
  SECTION("unknown recipe") {
    CHECK_THROWS_WITH(attacks::defenses::parse_recipe("trades"), Contains("trades"));
  }
  SECTION("negative eps") {
    o.pgd.eps = -0.1;
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("pgd.eps"));
  }
  SECTION("NaN eps") {
    o.pgd.eps = NAN;
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("pgd.eps"));
  }
  SECTION("negative alpha") {
    o.pgd.alpha = -1e-3;
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("pgd.alpha"));
  }
  SECTION("zero steps") {
    o.pgd.steps = 0;
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("pgd.steps"));
  }
  SECTION("negative ses_weight") {
    o.recipe = attacks::defenses::Recipe::Ses;
    o.ses_weight = -1.0;
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("ses_weight"));
  }
  SECTION("mdprop without adversarial branches") {
    o.recipe = attacks::defenses::Recipe::Mdprop;
    o.mdprop.targets = {};
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("mdprop.targets"));
  }
  SECTION("mdprop with a target count of 0") {
    o.recipe = attacks::defenses::Recipe::Mdprop;
    o.mdprop.targets = {1, 0};
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("mdprop.targets"));
  }
  SECTION("hm options are validated only for hm") {
    o.hm.gamma = -1.0;
    CHECK_NOTHROW(attacks::defenses::validate(o));
    o.recipe = attacks::defenses::Recipe::Hm;
    CHECK_THROWS_WITH(attacks::defenses::validate(o), Contains("hm.gamma"));
  }
  SECTION("eps = 0 is a valid budget (no attack)") {
    o.pgd.eps = 0.0;
    CHECK_NOTHROW(attacks::defenses::validate(o));
  }
}

TEST_CASE("make_defense: none is the vanilla path (null), every other name its recipe",
          "[defenses]") {
  DefenseOptions o;
  CHECK(attacks::defenses::make_defense(o) == nullptr);
  for (const std::string& name : attacks::defenses::defense_names()) {
    if (name == "none") continue;
    o.recipe = attacks::defenses::parse_recipe(name);
    INFO(name);
    const std::unique_ptr<attacks::defenses::Defense> d = attacks::defenses::make_defense(o);
    REQUIRE(d != nullptr);
    CHECK(std::string(d->name()) == name);
  }
  o.recipe = attacks::defenses::Recipe::Est;
  o.pgd.steps = 0;
  CHECK_THROWS_AS(attacks::defenses::make_defense(o), engine::Error);  // validated first
}

TEST_CASE("stateless recipes have no state and reject any key on load", "[defenses]") {
  for (const char* name : {"est", "rest", "ses", "act", "madry", "mdprop"}) {
    INFO(name);
    DefenseOptions o;
    o.recipe = attacks::defenses::parse_recipe(name);
    const std::unique_ptr<attacks::defenses::Defense> d = attacks::defenses::make_defense(o);
    CHECK(d->state().empty());
    CHECK_NOTHROW(d->load_state({}));
    const engine::Tensor value = engine::Tensor::scalar(1.0, engine::DType::F64);
    CHECK_THROWS_WITH(d->load_state({{"hm_previous_loss", value}}), Contains("hm_previous_loss"));
    CHECK_THROWS_WITH(d->load_state({{"bogus", value}}), Contains("bogus"));
  }
}

TEST_CASE("every recipe draws its PGD random start from the mining stream, one block per attack",
          "[defenses]") {
  // attacks/pgd.h seeded(): with random_start the seed comes from one Philox block of the trainer's
  // mining stream, so a checkpoint of that stream makes the random start resumable. The same
  // stream state gives the same loss; random_start costs exactly one more block per PGD attack
  // (MDProp: one per adversarial branch) and changes the adversarial examples.
  engine::Generator data(501);
  const defense_test::Spc2Batch batch = defense_test::make_spc2_batch(4, 2, data);
  for (const char* name : {"est", "rest", "ses", "act", "madry", "hm", "mdprop"}) {
    INFO(name);
    const bool mdprop = std::string(name) == "mdprop";
    auto run = [&](bool random_start, uint64_t* offset) {
      DefenseOptions o = defense_test::defense_options(name, 0.1, 0.02, 2);
      o.pgd.random_start = random_start;
      o.mdprop.targets = {1, 2};
      defense_test::Harness h(41, mdprop ? 3 : 1, losses::Metric::N, losses::Miner::Semihard, 511);
      const double loss = attacks::defenses::make_defense(o)
                              ->step(h.context, batch.images, batch.labels)
                              .loss.item();
      *offset = h.mining.offset;
      return loss;
    };
    uint64_t with_a = 0, with_b = 0, without = 0;
    const double a = run(true, &with_a);
    const double b = run(true, &with_b);
    const double c = run(false, &without);
    CHECK(a == b);
    CHECK(with_a == with_b);
    CHECK(with_a == without + (mdprop ? 2 : 1));
    CHECK(a != c);
  }
}
