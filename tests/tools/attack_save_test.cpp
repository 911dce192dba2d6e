// `dml attack --save-adversarial` (tools/dml/attack.cpp, attack_runner.cpp): every attacked image's
// adversarial version lands in one .npy, row i for image i of the split, written batch by batch.
// On a tiny C2F2 trained on the generated data of tiny_training.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/io/npy.h"
#include "engine/random.h"
#include "tests/io/io_test_util.h"
#include "tests/tools/tiny_training.h"
#include "tools/dml/args.h"
#include "tools/dml/attack_runner.h"
#include "tools/dml/commands.h"
#include "tools/dml/trainer.h"

namespace {

int attack(const std::string& checkpoint, const std::string& spec, std::vector<std::string> extra) {
  std::vector<std::string> tokens = {
      "--checkpoint", checkpoint, "--attack", spec,
      "--device",     "cpu",      "--root",   tiny_training::data_root()};
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  dml::Args args(tokens);
  return dml::run_attack_command(args);
}

}  // namespace

TEST_CASE("dml attack --save-adversarial: row i is image i's adversarial version",
          "[tools][attack]") {
  test::TempDir dir;
  REQUIRE(dml::train(tiny_training::tiny_config("triplet", dir.file("run"), 2),
                     dml::TrainOptions()) == 0);
  const std::string checkpoint = dir.file("run/model.safetensors");
  const double eps = 0.1;
  // 7 images in batches of 3: two full batches and a partial one.
  const std::string adversarial_path = dir.file("adversarial.npy");
  REQUIRE(attack(checkpoint, "ES:eps=0.1:alpha=0.02:pgditer=8",
                 {"--max-images", "7", "--batch-size", "3", "--save-adversarial",
                  adversarial_path}) == 0);
  const engine::Tensor adversarial = engine::load_npy(adversarial_path);
  REQUIRE(adversarial.shape() == engine::Shape{7, 1, 28, 28});
  REQUIRE(adversarial.dtype() == engine::DType::F32);

  const auto dataset = data::open_dataset("mnist", "test", tiny_training::data_root());
  const std::vector<double> adv = adversarial.to_vector();
  std::vector<double> clean;
  engine::Generator gen(0);  // test images are not augmented
  for (int64_t i = 0; i < 7; ++i) {
    const std::vector<double> image = dataset->image(i, gen).to_vector();
    clean.insert(clean.end(), image.begin(), image.end());
  }
  const size_t pixels = 28 * 28;
  // Each row stays within eps of its own image and in [0, 1], and the attack moved every row;
  // row i is far from image i + 1 (the order is the split's).
  for (size_t i = 0; i < 7; ++i) {
    double own = 0.0, moved = 0.0, next = 0.0;
    for (size_t p = 0; p < pixels; ++p) {
      const double a = adv[i * pixels + p];
      REQUIRE(a >= 0.0);
      REQUIRE(a <= 1.0);
      own = std::max(own, std::fabs(a - clean[i * pixels + p]));
      moved += std::fabs(a - clean[i * pixels + p]);
      if (i + 1 < 7) next = std::max(next, std::fabs(a - clean[(i + 1) * pixels + p]));
    }
    INFO("row " << i);
    CHECK(own <= eps + 1e-6);
    CHECK(moved > 0.0);
    if (i + 1 < 7) CHECK(next > 2 * eps);
  }

  // A path that cannot be written fails before the attack, with the file named; nothing is left.
  const std::string bad = dir.file("no/such/dir/adversarial.npy");
  REQUIRE_THROWS_WITH(attack(checkpoint, "ES:eps=0.1:alpha=0.02:pgditer=2",
                             {"--max-images", "2", "--save-adversarial", bad}),
                      Catch::Contains(bad));
  CHECK_FALSE(std::filesystem::exists(bad));
}
