// `dml train` on an image-folder data set (a generated CUB-200-2011 tree), where the train
// transform draws a random crop and flip per image from the loader's per-sample stream and
// several worker threads decode in parallel: a run stopped mid-epoch and resumed ends bit-identical
// to the uninterrupted run (model, BN running statistics, optimizer state, metrics). The
// IDX-based resume tests cannot see this: their images have no augmentation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/io/io_test_util.h"
#include "tests/support/gradient_png.h"
#include "tests/tools/tiny_training.h"

using nlohmann::json;

namespace {

// <root>/CUB_200_2011 with 8 training images (classes 1-4, two each) and 4 test images (classes
// 101 and 102), of different non-square sizes.
std::string make_cub(const test::TempDir& dir) {
  const std::string cub = dir.file("CUB_200_2011");
  std::string images_txt, labels_txt;
  const std::vector<int> classes = {1, 1, 2, 2, 3, 3, 4, 4, 101, 101, 102, 102};
  for (std::size_t i = 0; i < classes.size(); ++i) {
    const std::string name = std::to_string(classes[i]) + ".bird/img_" + std::to_string(i) + ".png";
    images_txt += std::to_string(i + 1) + " " + name + "\n";
    labels_txt += std::to_string(i + 1) + " " + std::to_string(classes[i]) + "\n";
    test::write_gradient_png(cub + "/images/" + name, 40 + 3 * int(i), 30 + 2 * int(i), int(i));
  }
  test::write_bytes(cub + "/images.txt", test::bytes_of(images_txt));
  test::write_bytes(cub + "/image_class_labels.txt", test::bytes_of(labels_txt));
  return cub;
}

}  // namespace

TEST_CASE("dml train: an augmented image-folder run with 3 workers resumes bit-identically",
          "[tools][train]") {
  test::TempDir dir;
  const std::string cub = make_cub(dir);
  // ResNet-18 (D = 8, train-mode BN) on 224 x 224 crops, SPC-2 batches of 2 pairs: 3 steps, the
  // second run stopped after the first and resumed.
  const json run = {
      {"data", {{"name", "cub200"}, {"root", cub}, {"num_workers", 3}, {"transform", "robrank"}}},
      {"model", {{"name", "resnet18"}, {"embedding_dim", 8}}},
      {"sampler", {{"pairs_per_batch", 2}}},
      {"eval", {{"max_images", 4}, {"batch_size", 4}}}};
  const std::vector<std::string> names =
      tiny_training::check_resume_bit_identical(dir.file("runs"), "triplet", 3, run, 1);
  // The BN running statistics were part of what had to match.
  CHECK(std::find(names.begin(), names.end(), "model.bn1.running_mean") != names.end());
}
