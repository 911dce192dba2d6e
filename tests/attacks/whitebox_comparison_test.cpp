// The gradient-masking check (attacks/whitebox_comparison.h), on values worked by hand.
#include <catch2/catch.hpp>

#include "attacks/whitebox_comparison.h"

TEST_CASE("Each measure's direction of a stronger attack", "[attacks][masking]") {
  CHECK(attacks::attack_strength_direction("CA+:prank") == -1);  // the candidate rises
  CHECK(attacks::attack_strength_direction("CA-:prank") == +1);
  CHECK(attacks::attack_strength_direction("QA+:prank") == -1);
  CHECK(attacks::attack_strength_direction("SPQA-:prank") == +1);
  CHECK(attacks::attack_strength_direction("SPQA+:GTprank") == 0);
  CHECK(attacks::attack_strength_direction("TMA:cosine") == +1);
  CHECK(attacks::attack_strength_direction("ES:D") == +1);
  CHECK(attacks::attack_strength_direction("ES:R") == -1);
  CHECK(attacks::attack_strength_direction("GTM:r@1") == -1);
  CHECK(attacks::attack_strength_direction("GTT:retain@4") == -1);
  CHECK(attacks::attack_strength_direction("MTAX:sqdist") == -1);
  CHECK_THROWS(attacks::attack_strength_direction("XYZ"));
}

TEST_CASE("A black-box attack stronger than the white-box one is flagged", "[attacks][masking]") {
  // CA+ white-box leaves the candidate at 20 %, the black-box at 12 %: 8 points stronger.
  auto c = attacks::compare_with_whitebox({"CA+:prank"}, {20.0}, {12.0});
  REQUIRE(c.size() == 1);
  CHECK(c[0].other_stronger);
  CHECK(attacks::gradient_masking_suspected(c));
  // Within the 1-point tolerance (20 vs 19.5), or weaker (20 vs 30): not flagged.
  CHECK_FALSE(attacks::gradient_masking_suspected(
      attacks::compare_with_whitebox({"CA+:prank"}, {20.0}, {19.5})));
  CHECK_FALSE(attacks::gradient_masking_suspected(
      attacks::compare_with_whitebox({"CA+:prank"}, {20.0}, {30.0})));
  // ES: a larger shift is stronger (0.8 vs 0.7: flagged); a recall of 61 vs 60 is weaker.
  c = attacks::compare_with_whitebox({"ES:D", "ES:R"}, {0.7, 60.0}, {0.8, 61.0});
  CHECK(c[0].other_stronger);
  CHECK_FALSE(c[1].other_stronger);
  // SP-QA's reference rank is no strength: left out.
  c = attacks::compare_with_whitebox({"SPQA+:prank", "SPQA+:GTprank"}, {5.0, 1.0}, {5.0, 90.0});
  CHECK(c.size() == 1);
  CHECK_FALSE(attacks::gradient_masking_suspected(c));
}
