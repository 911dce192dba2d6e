// CUB-200-2011 and Stanford Online Products readers on generated folder trees with the real
// layouts: split sizes, zero-shot class ranges, labels remapped to 0.., and the errors for a
// missing split file, an undecodable image and a missing image (each naming the file).
#include <stb/stb_image_write.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image_list.h"
#include "tests/io/io_test_util.h"
#include "tests/support/gradient_png.h"

using Catch::Contains;

namespace {

void write_png(const std::string& path, int w, int h, uint8_t value) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::vector<uint8_t> pixels(static_cast<std::size_t>(w * h * 3), value);
  REQUIRE(stbi_write_png(path.c_str(), w, h, 3, pixels.data(), w * 3) != 0);
}

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  test::write_bytes(path, test::bytes_of(text));
}

// <root>/CUB_200_2011 with 6 images: classes 1 (x2), 100 (train) and 101, 150, 200 (test).
std::string make_cub(const test::TempDir& dir) {
  const std::string cub = dir.file("CUB_200_2011");
  const std::vector<std::pair<std::string, int>> images = {
      {"001.Black_footed_Albatross/a_0001.jpg", 1}, {"101.White_Pelican/p_0001.jpg", 101},
      {"001.Black_footed_Albatross/a_0002.jpg", 1}, {"100.Brown_Pelican/b_0001.jpg", 100},
      {"200.Common_Yellowthroat/c_0001.jpg", 200},  {"150.Sage_Thrasher/s_0001.jpg", 150}};
  std::string images_txt, labels_txt;
  for (std::size_t i = 0; i < images.size(); ++i) {
    images_txt += std::to_string(i + 1) + " " + images[i].first + "\n";
    labels_txt += std::to_string(i + 1) + " " + std::to_string(images[i].second) + "\n";
    write_png(cub + "/images/" + images[i].first, 20 + int(i), 16, static_cast<uint8_t>(40 * i));
  }
  write_text(cub + "/images.txt", images_txt);
  write_text(cub + "/image_class_labels.txt", labels_txt);
  write_text(cub + "/train_test_split.txt", "1 1\n2 0\n3 1\n4 0\n5 1\n6 0\n");  // not used
  return cub;
}

// <root>/Stanford_Online_Products with lists at the top or under Info_Files/.
std::string make_sop(const test::TempDir& dir, bool info_files) {
  const std::string sop = dir.file("Stanford_Online_Products");
  const std::string lists = info_files ? sop + "/Info_Files" : sop;
  write_text(lists + "/Ebay_train.txt",
             "image_id class_id super_class_id path\n"
             "1 1 1 bicycle_final/111085122871_0.JPG\n"
             "2 1 1 bicycle_final/111085122871_1.JPG\n"
             "3 2 1 bicycle_final/111265328556_0.JPG\n");
  write_text(lists + "/Ebay_test.txt",
             "image_id class_id super_class_id path\n"
             "4 11319 1 bicycle_final/251952414262_0.JPG\n"
             "5 11320 12 toaster_final/252215402155_0.JPG\n");
  return sop;
}

}  // namespace

TEST_CASE("cub200: zero-shot split of a generated tree, labels remapped", "[data]") {
  test::TempDir dir;
  const std::string cub = make_cub(dir);
  // Both the CUB_200_2011 folder and its parent work as the root.
  for (const std::string& root : {cub, dir.file("")}) {
    auto train = data::open_dataset("cub200", "train", root);
    CHECK(train->size() == 3);  // ids 1, 1, 100
    CHECK(train->num_classes() == 2);
    CHECK(train->labels() == std::vector<int64_t>{0, 0, 1});  // 1 -> 0, 100 -> 1
    auto test_split = data::open_dataset("cub", "test", root);
    CHECK(test_split->size() == 3);  // ids 101, 200, 150
    CHECK(test_split->labels() == std::vector<int64_t>{0, 2, 1});
    const auto& list = dynamic_cast<const data::ImageListDataset&>(*test_split);
    CHECK(list.class_id(0) == 101);
    CHECK(list.path(1) == cub + "/images/200.Common_Yellowthroat/c_0001.jpg");
  }
  const std::vector<data::SplitSummary> s = data::describe_dataset("cub200", cub);
  REQUIRE(s.size() == 2);
  CHECK(s[0].size == 3);
  CHECK(s[0].first_class_id == 1);
  CHECK(s[0].last_class_id == 100);
  CHECK(s[1].num_classes == 3);
  CHECK(s[1].first_class_id == 101);
  CHECK(s[1].last_class_id == 200);
}

TEST_CASE("cub200: images decode to [3, 224, 224], train crops draw from the generator", "[data]") {
  test::TempDir dir;
  const std::string cub = make_cub(dir);
  auto train = data::open_dataset("cub200", "train", cub, /*augment=*/true);
  auto test_split = data::open_dataset("cub200", "test", cub);
  CHECK(train->image_shape() == engine::Shape{3, 224, 224});
  engine::Generator gen(5);
  // Test image 0 is images.txt line 2, written as a constant 40 (i = 1): 40 / 255 everywhere.
  const engine::Tensor x = test_split->image(0, gen);
  CHECK(x.shape() == engine::Shape{3, 224, 224});
  CHECK(x.to_vector()[0] == Approx(40.0 / 255.0).epsilon(1e-6));
  CHECK(gen.offset == 0);  // center crop: no random draws
  (void)train->image(0, gen);
  CHECK(gen.offset == 1);  // random crop + flip: one Philox block
  // The train split opened for evaluation (dml eval/embed/attack --split train) is not augmented:
  // the center crop, no draw, the same image for any generator. Train image 0 becomes a gradient
  // here, so that a random crop or flip would show.
  test::write_gradient_png(cub + "/images/001.Black_footed_Albatross/a_0001.jpg", 23, 17);
  auto train_eval = data::open_dataset("cub200", "train", cub);
  engine::Generator other(6);
  const engine::Tensor a = train_eval->image(0, gen), b = train_eval->image(0, other);
  CHECK(gen.offset == 1);
  CHECK(a.to_vector() == b.to_vector());
  bool augmented_differs = false;  // the augmenting split: crops and flips move the pixels
  for (uint64_t seed = 1; seed <= 8 && !augmented_differs; ++seed) {
    engine::Generator g(seed);
    augmented_differs = train->image(0, g).to_vector() != a.to_vector();
  }
  CHECK(augmented_differs);
}

TEST_CASE("cub200 errors: missing split files and bad images name the file", "[data]") {
  test::TempDir dir;
  const std::string cub = make_cub(dir);
  SECTION("missing image_class_labels.txt") {
    std::filesystem::remove(cub + "/image_class_labels.txt");
    REQUIRE_THROWS_WITH(data::open_dataset("cub200", "train", cub),
                        Contains(cub + "/image_class_labels.txt"));
  }
  SECTION("missing images.txt") {
    std::filesystem::remove(cub + "/images.txt");
    REQUIRE_THROWS_WITH(data::open_dataset("cub200", "test", cub), Contains("images.txt"));
  }
  SECTION("class id out of range, with the line") {
    write_text(cub + "/image_class_labels.txt", "1 1\n2 201\n");
    REQUIRE_THROWS_WITH(data::open_dataset("cub200", "train", cub),
                        Contains("image_class_labels.txt:2") && Contains("201"));
  }
  SECTION("an image without a class") {
    write_text(cub + "/image_class_labels.txt", "1 1\n");
    REQUIRE_THROWS_WITH(data::open_dataset("cub200", "train", cub), Contains("image_id 2"));
  }
  SECTION("a split without images") {
    write_text(cub + "/image_class_labels.txt", "1 1\n2 1\n3 1\n4 1\n5 1\n6 1\n");
    REQUIRE_THROWS_WITH(data::open_dataset("cub200", "test", cub), Contains("no image"));
    CHECK(data::describe_dataset("cub200", cub)[1].size == 0);
  }
  SECTION("undecodable image") {
    const std::string bad = cub + "/images/001.Black_footed_Albatross/a_0001.jpg";
    test::write_bytes(bad, test::bytes_of("this is not a JPEG file"));
    auto train = data::open_dataset("cub200", "train", cub);
    engine::Generator gen(0);
    REQUIRE_THROWS_WITH(train->image(0, gen), Contains(bad) && Contains("decode"));
  }
  SECTION("missing image") {
    const std::string gone = cub + "/images/100.Brown_Pelican/b_0001.jpg";
    std::filesystem::remove(gone);
    auto train = data::open_dataset("cub200", "train", cub);
    engine::Generator gen(0);
    REQUIRE_THROWS_WITH(train->image(2, gen), Contains(gone));
  }
  SECTION("no root") {
    REQUIRE_THROWS_WITH(data::open_dataset("cub200", "train"), Contains("root"));
  }
}

TEST_CASE("sop: Ebay_train / Ebay_test lists, header skipped, class ids remapped", "[data]") {
  for (const bool info_files : {false, true}) {
    test::TempDir dir;
    const std::string sop = make_sop(dir, info_files);
    write_png(sop + "/toaster_final/252215402155_0.JPG", 9, 7, 200);
    for (const std::string& root : {sop, dir.file("")}) {
      auto train = data::open_dataset("sop", "train", root);
      CHECK(train->size() == 3);
      CHECK(train->num_classes() == 2);
      CHECK(train->labels() == std::vector<int64_t>{0, 0, 1});
      auto test_split = data::open_dataset("sop", "test", root);
      CHECK(test_split->size() == 2);
      CHECK(test_split->labels() == std::vector<int64_t>{0, 1});  // 11319, 11320 -> 0, 1
      const auto& list = dynamic_cast<const data::ImageListDataset&>(*test_split);
      CHECK(list.class_id(0) == 11319);
      CHECK(list.path(1) == sop + "/toaster_final/252215402155_0.JPG");
      engine::Generator gen(0);
      CHECK(test_split->image(1, gen).to_vector()[7] == Approx(200.0 / 255.0).epsilon(1e-6));
    }
    const std::vector<data::SplitSummary> s = data::describe_dataset("sop", sop);
    CHECK(s[1].first_class_id == 11319);
    CHECK(s[1].last_class_id == 11320);
  }
}

TEST_CASE("sop: the Revisiting-DML layout, lists in Info_Files/ and images under images/",
          "[data]") {
  test::TempDir dir;
  const std::string sop = make_sop(dir, /*info_files=*/true);
  write_png(sop + "/images/toaster_final/252215402155_0.JPG", 9, 7, 120);
  auto test_split = data::open_dataset("sop", "test", sop);
  const auto& list = dynamic_cast<const data::ImageListDataset&>(*test_split);
  CHECK(list.path(1) == sop + "/images/toaster_final/252215402155_0.JPG");
  engine::Generator gen(0);
  CHECK(test_split->image(1, gen).to_vector()[7] == Approx(120.0 / 255.0).epsilon(1e-6));
}

TEST_CASE("sop errors: missing list file, malformed line", "[data]") {
  test::TempDir dir;
  const std::string sop = make_sop(dir, false);
  std::filesystem::remove(sop + "/Ebay_test.txt");
  REQUIRE_THROWS_WITH(data::open_dataset("sop", "test", sop), Contains("Ebay_test.txt"));
  write_text(sop + "/Ebay_train.txt", "image_id class_id super_class_id path\n1 x 1 a.JPG\n");
  REQUIRE_THROWS_WITH(data::open_dataset("sop", "train", sop),
                      Contains("Ebay_train.txt:2") && Contains("class_id 'x'"));
}

TEST_CASE("cub200 and sop lists parse from their text as from the files", "[data]") {
  // The readers split and parse the files' text with these (tests/fuzz/fuzz_list_file.cpp feeds
  // them any bytes): CRLF line ends, blank lines counted in line numbers, a last line without "\n".
  const data::ImageList cub =
      data::parse_cub_lists("cub", "test", "1 a.jpg\r\n\r\n2  b c.jpg ", "2 101\r\n1 200\n");
  REQUIRE(cub.paths.size() == 2);
  CHECK(cub.paths[0] == "cub/images/a.jpg");
  CHECK(cub.paths[1] == "cub/images/b c.jpg");
  CHECK(cub.class_ids == std::vector<int64_t>{200, 101});
  CHECK(data::parse_cub_lists("cub", "train", "1 a.jpg", "1 200").paths.empty());
  REQUIRE_THROWS_WITH(data::parse_cub_lists("cub", "test", "1 a.jpg\n", "\n1 201\n"),
                      Contains("cub/image_class_labels.txt:2") && Contains("not in 1..200"));
  REQUIRE_THROWS_WITH(data::parse_cub_lists("cub", "test", "1 a.jpg\n", ""),
                      Contains("no class for image_id 1") && Contains("cub/images.txt line 1"));

  const data::ImageList sop = data::parse_sop_list(
      "image_id class_id super_class_id path\r\n1 7 1 x/a.JPG", "Ebay_train.txt", "sop");
  CHECK(sop.paths == std::vector<std::string>{"sop/x/a.JPG"});
  CHECK(sop.class_ids == std::vector<int64_t>{7});
  REQUIRE_THROWS_WITH(data::parse_sop_list("\n\n1 0 1 a.JPG", "Ebay_test.txt", "sop"),
                      Contains("Ebay_test.txt:3") && Contains("not positive"));
}
