// The MAT-file reader on hand-built Level-5 files (plain and compressed, every element form
// CARS196 needs), and the CARS196 reader on generated trees in both layouts: the original
// cars_annos.mat and the CSV re-packaging.
#include <stb/stb_image_write.h>
#include <zlib.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image_list.h"
#include "data/mat_file.h"
#include "tests/io/io_test_util.h"

using Catch::Contains;
using Bytes = std::vector<uint8_t>;

namespace {

// ---- a minimal MAT v5 writer, written from the format description (mat_file.h) ----------------

void put32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// [u32 type][u32 byte count][data][zero padding to 8 bytes]
Bytes element(uint32_t type, const Bytes& data) {
  Bytes out;
  put32(out, type);
  put32(out, static_cast<uint32_t>(data.size()));
  test::append(out, data);
  while (out.size() % 8 != 0) out.push_back(0);
  return out;
}

// Small element: [u16 byte count << 16 | u16 type][up to 4 data bytes, zero padded]
Bytes small_element(uint32_t type, const Bytes& data) {
  Bytes out;
  put32(out, (static_cast<uint32_t>(data.size()) << 16) | type);
  test::append(out, data);
  while (out.size() < 8) out.push_back(0);
  return out;
}

Bytes int32s(const std::vector<int32_t>& values) {
  Bytes out;
  for (int32_t v : values) put32(out, static_cast<uint32_t>(v));
  return out;
}

// miMATRIX: flags (class), dims, name (small element when it fits), then the body.
Bytes matrix(uint8_t array_class, const std::vector<int32_t>& dims, const std::string& name,
             const Bytes& body) {
  Bytes content = element(6, {array_class, 0, 0, 0, 0, 0, 0, 0});  // miUINT32 flags
  test::append(content, element(5, int32s(dims)));                 // miINT32 dims
  const Bytes name_bytes(name.begin(), name.end());
  test::append(content,
               name_bytes.size() <= 4 ? small_element(1, name_bytes) : element(1, name_bytes));
  test::append(content, body);
  return element(14, content);
}

// A char row in UTF-16 (miUINT16), as MATLAB writes it.
Bytes char_row(const std::string& text, const std::string& name = "") {
  Bytes units;
  for (char c : text) {
    units.push_back(static_cast<uint8_t>(c));
    units.push_back(0);
  }
  return matrix(4, {1, static_cast<int32_t>(text.size())}, name, element(4, units));
}

// A double scalar stored compactly as one miUINT8 byte (MATLAB does this for small integers).
Bytes compact_double(uint8_t value) { return matrix(6, {1, 1}, "", small_element(2, {value})); }

Bytes struct_array(const std::string& name, const std::vector<std::string>& fields,
                   const std::vector<Bytes>& values /* element-major */) {
  const int32_t field_length = 32;
  Bytes names;
  for (const std::string& f : fields) {
    Bytes padded(f.begin(), f.end());
    padded.resize(field_length, 0);
    test::append(names, padded);
  }
  Bytes body = small_element(5, int32s({field_length}));
  test::append(body, element(1, names));
  for (const Bytes& v : values) test::append(body, v);
  const auto n = static_cast<int32_t>(values.size() / fields.size());
  return matrix(2, {1, n}, name, body);
}

Bytes mat_header() {
  std::string text = "MATLAB 5.0 MAT-file, written by the engine's tests";
  text.resize(116, ' ');
  Bytes out(text.begin(), text.end());
  out.resize(124, 0);   // subsystem data offset
  out.push_back(0x00);  // version 0x0100, little-endian
  out.push_back(0x01);
  out.push_back('I');  // endian indicator "MI" written as a u16 -> "IM" on disk
  out.push_back('M');
  return out;
}

Bytes compressed(const Bytes& inner) {
  uLongf size = compressBound(inner.size());
  Bytes z(size);
  REQUIRE(compress2(z.data(), &size, inner.data(), inner.size(), 6) == Z_OK);
  z.resize(size);
  Bytes out;
  put32(out, 15);  // miCOMPRESSED, not padded
  put32(out, static_cast<uint32_t>(z.size()));
  test::append(out, z);
  return out;
}

const std::vector<std::string> kAnnotationFields = {
    "relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"};

// cars_annos.mat with one annotation per (path, class).
Bytes cars_annos(const std::vector<std::pair<std::string, uint8_t>>& images, bool compress,
                 const std::vector<std::string>& fields = kAnnotationFields) {
  std::vector<Bytes> values;
  for (const auto& [path, cls] : images) {
    values.push_back(char_row(path));
    for (uint8_t v : {uint8_t(1), uint8_t(2), uint8_t(30), uint8_t(40)}) {
      values.push_back(compact_double(v));
    }
    values.push_back(compact_double(cls));
    values.push_back(compact_double(0));
  }
  const Bytes annotations = struct_array("annotations", fields, values);
  Bytes cells = char_row("AM General Hummer SUV 2000");
  test::append(cells, char_row("Acura RL Sedan 2012"));
  const Bytes class_names = matrix(1, {1, 2}, "class_names", cells);
  Bytes out = mat_header();
  test::append(out, compress ? compressed(annotations) : annotations);
  test::append(out, compress ? compressed(class_names) : class_names);
  return out;
}

void write_png(const std::string& path, int w, int h, uint8_t value) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::vector<uint8_t> pixels(static_cast<std::size_t>(w * h * 3), value);
  REQUIRE(stbi_write_png(path.c_str(), w, h, 3, pixels.data(), w * 3) != 0);
}

}  // namespace

TEST_CASE("mat file: struct array with char and compact numeric fields, cell of strings",
          "[data]") {
  for (const bool compress : {false, true}) {
    const Bytes file =
        cars_annos({{"car_ims/000001.jpg", 14}, {"car_ims/000002.jpg", 3}}, compress);
    const std::vector<data::MatArray> vars = data::parse_mat(file.data(), file.size(), "x.mat");
    REQUIRE(vars.size() == 2);
    const data::MatArray& a = vars[0];
    CHECK(a.name == "annotations");
    CHECK(a.kind == data::MatArray::Kind::Struct);
    CHECK(a.dims == std::vector<int64_t>{1, 2});
    CHECK(a.field_names == kAnnotationFields);
    CHECK(a.field(0, "relative_im_path").text == "car_ims/000001.jpg");
    CHECK(a.field(1, "relative_im_path").text == "car_ims/000002.jpg");
    CHECK(a.field(0, "class").numbers == std::vector<double>{14});
    CHECK(a.field(1, "class").numbers == std::vector<double>{3});
    CHECK(a.field(1, "bbox_x2").numbers == std::vector<double>{30});
    REQUIRE_THROWS_WITH(a.field(0, "fname"), Contains("no field 'fname'") && Contains("class"));
    const data::MatArray& names = vars[1];
    CHECK(names.name == "class_names");
    CHECK(names.kind == data::MatArray::Kind::Cell);
    REQUIRE(names.elements.size() == 2);
    CHECK(names.elements[1].text == "Acura RL Sedan 2012");
  }
}

TEST_CASE("mat file: numeric element types, multi-row chars, empty arrays", "[data]") {
  // A 1x3 double array stored as miINT16 {-2, 300, 7}; a 1x2 single array (miSINGLE 0.5, 2.25);
  // a 2x2 char array "ab" / "cd" stored column-major as a, c, b, d; an empty 0x0 double.
  Bytes out = mat_header();
  test::append(out, matrix(6, {1, 3}, "ints", element(3, {0xFE, 0xFF, 0x2C, 0x01, 0x07, 0x00})));
  Bytes singles(8);
  const float half = 0.5f, more = 2.25f;
  std::memcpy(singles.data(), &half, 4);
  std::memcpy(singles.data() + 4, &more, 4);
  test::append(out, matrix(7, {1, 2}, "f", element(7, singles)));
  test::append(out, matrix(4, {2, 2}, "grid", element(4, {'a', 0, 'c', 0, 'b', 0, 'd', 0})));
  test::append(out, matrix(6, {0, 0}, "none", element(9, {})));
  const std::vector<data::MatArray> vars = data::parse_mat(out.data(), out.size(), "t.mat");
  REQUIRE(vars.size() == 4);
  CHECK(vars[0].numbers == std::vector<double>{-2, 300, 7});
  CHECK(vars[1].numbers == std::vector<double>{0.5, 2.25});
  CHECK(vars[2].text == "ab\ncd");
  CHECK(vars[3].numel() == 0);
}

TEST_CASE("mat file: an empty char array is the empty text, whatever rows it declares", "[data]") {
  // A 3x0 char array, and the fuzzer's find (fuzz_mat): a 0x410002A3 x 0 char array, which a
  // 100-byte file declares and whose rows were once joined into a gigabyte of newlines. Neither
  // has a character, so both read as "", with their dimensions kept.
  Bytes out = mat_header();
  test::append(out, matrix(4, {3, 0}, "few", element(4, {})));
  test::append(out, matrix(4, {0x410002A3, 0}, "many", element(4, {})));
  const std::vector<data::MatArray> vars = data::parse_mat(out.data(), out.size(), "e.mat");
  REQUIRE(vars.size() == 2);
  CHECK(vars[0].kind == data::MatArray::Kind::Char);
  CHECK(vars[0].text.empty());
  CHECK(vars[0].dims == std::vector<int64_t>{3, 0});
  CHECK(vars[1].text.empty());
  CHECK(vars[1].dims == std::vector<int64_t>{0x410002A3, 0});
}

TEST_CASE("mat file: a struct array without fields reads at once, however many elements",
          "[data]") {
  // The fuzzer's second find (fuzz_mat): a 2^16 x 2^24 struct array (2^40 elements, the reader's
  // limit) with no fields, which stores nothing per element; the reader looped over every element.
  Bytes body = small_element(5, int32s({32}));  // field name length 32, no names
  test::append(body, element(1, {}));
  Bytes out = mat_header();
  test::append(out, matrix(2, {1 << 16, 1 << 24}, "bare", body));
  const std::vector<data::MatArray> vars = data::parse_mat(out.data(), out.size(), "s.mat");
  REQUIRE(vars.size() == 1);
  CHECK(vars[0].kind == data::MatArray::Kind::Struct);
  CHECK(vars[0].field_names.empty());
  CHECK(vars[0].elements.empty());
  CHECK(vars[0].numel() == int64_t(1) << 40);
}

TEST_CASE("mat file errors: each names the file", "[data]") {
  const Bytes good = cars_annos({{"car_ims/000001.jpg", 1}}, false);
  SECTION("truncated inside a variable") {
    const Bytes cut(good.begin(), good.begin() + 200);
    REQUIRE_THROWS_WITH(data::parse_mat(cut.data(), cut.size(), "cut.mat"),
                        Contains("cut.mat") && Contains("truncated"));
  }
  SECTION("shorter than the header") {
    REQUIRE_THROWS_WITH(data::parse_mat(good.data(), 100, "short.mat"), Contains("short.mat"));
  }
  SECTION("big-endian") {
    Bytes be = good;
    be[126] = 'M';
    be[127] = 'I';
    REQUIRE_THROWS_WITH(data::parse_mat(be.data(), be.size(), "be.mat"),
                        Contains("be.mat") && Contains("big-endian"));
  }
  SECTION("v7.3 (HDF5)") {
    Bytes v73 = good;
    std::memcpy(v73.data(), "MATLAB 7.3 MAT-file", 19);
    REQUIRE_THROWS_WITH(data::parse_mat(v73.data(), v73.size(), "h5.mat"),
                        Contains("h5.mat") && Contains("7.3"));
  }
  SECTION("truncated compressed variable") {
    Bytes z = cars_annos({{"car_ims/000001.jpg", 1}}, true);
    // Shorten the first compressed element's stream but keep its byte count consistent.
    const uint32_t count = uint32_t(z[132]) | (uint32_t(z[133]) << 8);
    const Bytes stream(z.begin() + 136, z.begin() + 136 + count / 2);
    Bytes cut = mat_header();
    put32(cut, 15);
    put32(cut, static_cast<uint32_t>(stream.size()));
    test::append(cut, stream);
    REQUIRE_THROWS_WITH(data::parse_mat(cut.data(), cut.size(), "z.mat"),
                        Contains("z.mat") && Contains("compressed"));
  }
  SECTION("sparse arrays are refused") {
    Bytes sparse = mat_header();
    test::append(sparse, matrix(5, {2, 2}, "s", {}));
    REQUIRE_THROWS_WITH(data::parse_mat(sparse.data(), sparse.size(), "s.mat"),
                        Contains("s.mat") && Contains("sparse"));
  }
}

TEST_CASE("cars196: original layout (cars_annos.mat), classes 1-98 train, 99-196 test", "[data]") {
  test::TempDir dir;
  const std::string root = dir.file("cars");
  // Classes 1, 98 (train) and 99, 196 (test); 5 images.
  const std::vector<std::pair<std::string, uint8_t>> images = {{"car_ims/000001.jpg", 1},
                                                               {"car_ims/000002.jpg", 99},
                                                               {"car_ims/000003.jpg", 98},
                                                               {"car_ims/000004.jpg", 196},
                                                               {"car_ims/000005.jpg", 1}};
  std::filesystem::create_directories(root);
  test::write_bytes(root + "/cars_annos.mat", cars_annos(images, true));
  for (const auto& image : images) write_png(root + "/" + image.first, 12, 10, 90);

  auto train = data::open_dataset("cars196", "train", root);
  CHECK(train->size() == 3);
  CHECK(train->num_classes() == 2);
  CHECK(train->labels() == std::vector<int64_t>{0, 1, 0});  // ids 1, 98, 1
  auto test_split = data::open_dataset("cars", "test", root);
  CHECK(test_split->size() == 2);
  CHECK(test_split->labels() == std::vector<int64_t>{0, 1});  // ids 99, 196
  const auto& list = dynamic_cast<const data::ImageListDataset&>(*test_split);
  CHECK(list.path(0) == root + "/car_ims/000002.jpg");
  CHECK(list.class_id(1) == 196);
  engine::Generator gen(3);
  const engine::Tensor x = test_split->image(0, gen);
  CHECK(x.shape() == engine::Shape{3, 224, 224});
  CHECK(x.to_vector()[1234] == Approx(90.0 / 255.0).epsilon(1e-6));  // a constant image stays so

  const std::vector<data::SplitSummary> s = data::describe_dataset("cars196", root);
  CHECK(s[0].size == 3);
  CHECK(s[0].first_class_id == 1);
  CHECK(s[0].last_class_id == 98);
  CHECK(s[1].first_class_id == 99);
}

TEST_CASE("cars196: CSV re-packaging, images found in class folders or flat", "[data]") {
  test::TempDir dir;
  const std::string root = dir.file("cars");
  std::filesystem::create_directories(root);
  test::write_bytes(root + "/anno_train.csv",
                    test::bytes_of("00001.jpg,1,2,30,40,14\n00002.jpg,1,2,30,40,120\n"));
  test::write_bytes(root + "/anno_test.csv", test::bytes_of("00001.jpg,5,6,70,80,14\r\n"));
  test::write_bytes(root + "/names.csv", test::bytes_of("AM General Hummer SUV 2000\n"));
  write_png(root + "/car_data/car_data/train/Class A/00001.jpg", 8, 8, 10);
  write_png(root + "/car_data/car_data/train/Class B/00002.jpg", 8, 8, 20);
  write_png(root + "/car_data/car_data/test/00001.jpg", 8, 8, 30);  // flat

  auto train = data::open_dataset("cars196", "train", root);  // class 14 from both CSV files
  REQUIRE(train->size() == 2);
  const auto& list = dynamic_cast<const data::ImageListDataset&>(*train);
  CHECK(list.path(0) == root + "/car_data/car_data/train/Class A/00001.jpg");
  CHECK(list.path(1) == root + "/car_data/car_data/test/00001.jpg");
  auto test_split = data::open_dataset("cars196", "test", root);
  REQUIRE(test_split->size() == 1);
  CHECK(dynamic_cast<const data::ImageListDataset&>(*test_split).class_id(0) == 120);

  SECTION("an image listed in the CSV but absent is named") {
    test::write_bytes(root + "/anno_test.csv", test::bytes_of("09999.jpg,5,6,70,80,14\n"));
    REQUIRE_THROWS_WITH(data::open_dataset("cars196", "train", root),
                        Contains("anno_test.csv:1") && Contains("09999.jpg"));
  }
  SECTION("a missing CSV file is named") {
    std::filesystem::remove(root + "/anno_test.csv");
    REQUIRE_THROWS_WITH(data::open_dataset("cars196", "test", root), Contains("anno_test.csv"));
  }
}

TEST_CASE("cars196: unnamed .mat fields fall back to robrank's positions 0 (path), 5 (class)",
          "[data]") {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("cars"));
  const std::vector<std::string> fields = {"a", "b", "c", "d", "e", "f", "g"};
  test::write_bytes(
      dir.file("cars/cars_annos.mat"),
      cars_annos({{"car_ims/000001.jpg", 5}, {"car_ims/000002.jpg", 150}}, false, fields));
  const auto train = data::open_dataset("cars196", "train", dir.file("cars"));
  REQUIRE(train->size() == 1);
  CHECK(dynamic_cast<const data::ImageListDataset&>(*train).class_id(0) == 5);
  // With another number of fields there is no safe guess: the error lists the fields.
  test::write_bytes(dir.file("cars/cars_annos.mat"),
                    cars_annos({{"car_ims/000001.jpg", 5}}, false, {"a", "b"}));
  REQUIRE_THROWS_WITH(data::open_dataset("cars196", "train", dir.file("cars")),
                      Contains("relative_im_path") && Contains("fields: a, b"));
}

TEST_CASE("cars196 errors: no annotation file, bad class in the .mat", "[data]") {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("empty"));
  REQUIRE_THROWS_WITH(data::open_dataset("cars196", "train", dir.file("empty")),
                      Contains("cars_annos.mat") && Contains("anno_train.csv"));
  std::filesystem::create_directories(dir.file("bad"));
  test::write_bytes(dir.file("bad/cars_annos.mat"), cars_annos({{"car_ims/1.jpg", 197}}, false));
  REQUIRE_THROWS_WITH(data::open_dataset("cars196", "train", dir.file("bad")),
                      Contains("cars_annos.mat") && Contains("class 197"));
}

TEST_CASE("cars196: the CSV lists parse from their text as from the files", "[data]") {
  // Every line of either split, with its line number (blank lines count); the image folder is
  // searched later, by read_cars_list.
  const std::vector<data::CarsCsvEntry> entries =
      data::parse_cars_csv("00001.jpg,39,116,569,375,14\r\n\n00002.jpg,,,,, 196 ", "anno.csv");
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].file == "00001.jpg");
  CHECK(entries[0].class_id == 14);
  CHECK(entries[0].line == 1);
  CHECK(entries[1].file == "00002.jpg");
  CHECK(entries[1].class_id == 196);
  CHECK(entries[1].line == 3);
  CHECK(data::parse_cars_csv("", "anno.csv").empty());
  REQUIRE_THROWS_WITH(data::parse_cars_csv("a.jpg,1,2,3,4,197\n", "anno.csv"),
                      Contains("anno.csv:1") && Contains("not in 1..196"));
  REQUIRE_THROWS_WITH(data::parse_cars_csv("a.jpg;1;2;3;4;5\n", "anno.csv"),
                      Contains("anno.csv:1") && Contains("expected 'file,x1,y1,x2,y2,class'"));
}
