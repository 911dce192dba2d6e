// safetensors reader/writer: hand-written bytes, bit-exact round trips, the Tensor level, a corpus
// of malformed files (each must give an engine::Error naming the file, never a crash) and the
// atomic write.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/file_io.h"
#include "engine/io/safetensors.h"
#include "tests/io/io_test_util.h"
#include "tests/support/cuda_guard.h"

using engine::RawTensor;
using engine::SafetensorsDType;
using engine::SafetensorsFile;

namespace {

// [u64 LE header length][json][data]; `declared` overrides the length field.
std::vector<uint8_t> st_bytes(const std::string& json, const std::vector<uint8_t>& data = {},
                              int64_t declared = -1) {
  const uint64_t length = declared >= 0 ? static_cast<uint64_t>(declared) : json.size();
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(length >> (8 * i)));
  test::append(out, test::bytes_of(json));
  test::append(out, data);
  return out;
}

RawTensor raw(SafetensorsDType dtype, engine::Shape shape, std::vector<uint8_t> bytes) {
  RawTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes = std::move(bytes);
  return tensor;
}

// Every supported dtype with awkward values: NaN payloads, -0.0, inf, subnormals, extremes.
SafetensorsFile awkward_file() {
  SafetensorsFile file;
  file.tensors.emplace_back(
      "f32", raw(SafetensorsDType::F32, {2, 3},
                 test::le_bytes<uint32_t>({0x7FC00001u, 0xFFA00005u, 0x80000000u, 0x7F800000u,
                                           0x00000001u, 0x3F800000u})));
  file.tensors.emplace_back(
      "f64", raw(SafetensorsDType::F64, {3},
                 test::le_bytes<uint64_t>(
                     {0x7FF8000000000123ull, 0x8000000000000000ull, 0x0000000000000001ull})));
  file.tensors.emplace_back("f16", raw(SafetensorsDType::F16, {4},
                                       test::le_bytes<uint16_t>({0x7E01, 0x8000, 0x0001, 0x7C00})));
  file.tensors.emplace_back("bf16",
                            raw(SafetensorsDType::BF16, {2, 2},
                                test::le_bytes<uint16_t>({0x7FC1, 0x8000, 0x3F80, 0xFF80})));
  file.tensors.emplace_back(
      "i64", raw(SafetensorsDType::I64, {2}, test::le_bytes<int64_t>({INT64_MIN, INT64_MAX})));
  file.tensors.emplace_back("u8", raw(SafetensorsDType::U8, {3}, {0, 128, 255}));
  file.tensors.emplace_back("empty", raw(SafetensorsDType::F32, {2, 0, 3}, {}));
  file.tensors.emplace_back("scalar",
                            raw(SafetensorsDType::F64, {}, test::le_bytes<double>({-2.5})));
  file.metadata = {{"format", "pt"}, {"note", "ünïcode ✓"}};
  return file;
}

void require_same(const SafetensorsFile& got, const SafetensorsFile& expected) {
  REQUIRE(got.tensors.size() == expected.tensors.size());
  for (const auto& [name, tensor] : expected.tensors) {
    INFO("tensor " << name);
    const RawTensor* found = got.find(name);
    REQUIRE(found != nullptr);
    CHECK(found->dtype == tensor.dtype);
    CHECK(found->shape == tensor.shape);
    CHECK(found->bytes == tensor.bytes);  // bit-exact, NaN payloads included
  }
  CHECK(got.metadata == expected.metadata);
}

}  // namespace

TEST_CASE("safetensors parse: hand-written bytes of one F32 tensor [2] = {1, 2}", "[io]") {
  // JSON {"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is 54 bytes:
  //   {"x":  5, {"dtype":"F32",  14, "shape":[2],  12, "data_offsets":[0,8]  20, }}  2
  // padded with 2 spaces to 56 = 0x38. 1.0f = 0x3F800000, 2.0f = 0x40000000 (little-endian).
  std::vector<uint8_t> bytes = {0x38, 0, 0, 0, 0, 0, 0, 0};
  test::append(bytes,
               test::bytes_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  )"));
  test::append(bytes, {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40});
  REQUIRE(bytes.size() == 72);

  const SafetensorsFile file = engine::parse_safetensors(bytes.data(), bytes.size(), "tiny");
  REQUIRE(file.tensors.size() == 1);
  CHECK(file.tensors[0].first == "x");
  CHECK(file.tensors[0].second.dtype == SafetensorsDType::F32);
  CHECK(file.tensors[0].second.shape == engine::Shape{2});
  CHECK(file.metadata.empty());

  // Our writer produces exactly these bytes (the reference's compact JSON and padding).
  CHECK(engine::serialize_safetensors(file) == bytes);

  test::TempDir dir;
  test::write_bytes(dir.file("tiny.safetensors"), bytes);
  const auto tensors = engine::load_safetensors(dir.file("tiny.safetensors"));
  REQUIRE(tensors.count("x") == 1);
  CHECK(tensors.at("x").dtype() == engine::DType::F32);
  CHECK(tensors.at("x").to_vector() == std::vector<double>{1.0, 2.0});
}

TEST_CASE("safetensors round trip: every dtype bit-exact, empty, scalar, metadata", "[io]") {
  const SafetensorsFile original = awkward_file();
  test::TempDir dir;
  const std::string path = dir.file("all.safetensors");
  engine::write_safetensors(path, original);

  require_same(engine::read_safetensors(path), original);
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  CHECK(bytes == engine::serialize_safetensors(original));
  require_same(engine::parse_safetensors(bytes.data(), bytes.size(), path), original);

  // Header padded to a multiple of 8 and starting with the metadata.
  const uint64_t header_length = bytes[0] | (uint64_t{bytes[1]} << 8);
  CHECK(header_length % 8 == 0);
  CHECK(std::string(bytes.begin() + 8, bytes.begin() + 24) == R"({"__metadata__":)");

  // Writing what we read gives the same file again.
  const std::string again = dir.file("again.safetensors");
  engine::write_safetensors(again, engine::read_safetensors(path));
  CHECK(test::read_bytes(again) == bytes);
}

TEST_CASE("safetensors write: tensors ordered by dtype alignment (descending), then name", "[io]") {
  SafetensorsFile file;
  file.tensors.emplace_back("b_u8", raw(SafetensorsDType::U8, {1}, {7}));
  file.tensors.emplace_back("z_f32", raw(SafetensorsDType::F32, {1}, test::le_bytes<float>({1})));
  file.tensors.emplace_back("a_f16", raw(SafetensorsDType::F16, {1}, {0, 0x3C}));
  file.tensors.emplace_back("z_bf16", raw(SafetensorsDType::BF16, {1}, {0x80, 0x3F}));
  file.tensors.emplace_back("y_i64", raw(SafetensorsDType::I64, {1}, test::le_bytes<int64_t>({3})));
  file.tensors.emplace_back("a_f32", raw(SafetensorsDType::F32, {1}, test::le_bytes<float>({2})));
  file.tensors.emplace_back("x_f64", raw(SafetensorsDType::F64, {1}, test::le_bytes<double>({4})));
  const std::vector<uint8_t> bytes = engine::serialize_safetensors(file);
  const SafetensorsFile back = engine::parse_safetensors(bytes.data(), bytes.size(), "order");
  std::vector<std::string> names;
  for (const auto& [name, tensor] : back.tensors) names.push_back(name);  // file (offset) order
  // Equal alignments keep the reference's enum order: I64 before F64, BF16 before F16.
  CHECK(names ==
        std::vector<std::string>{"y_i64", "x_f64", "a_f32", "z_f32", "z_bf16", "a_f16", "b_u8"});
}

TEST_CASE("safetensors write: byte-identical to the reference implementation's own test files",
          "[io]") {
  // safetensors/src/tensor.rs tests: an empty file is "{}" padded to 8 bytes.
  SafetensorsFile empty;
  std::vector<uint8_t> expected = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
  CHECK(engine::serialize_safetensors(empty) == expected);

  // The same with metadata {"framework": "pt"}: 35 JSON bytes padded to 40.
  empty.metadata = {{"framework", "pt"}};
  expected = {40, 0, 0, 0, 0, 0, 0, 0};
  test::append(expected, test::bytes_of(R"({"__metadata__":{"framework":"pt"}}     )"));
  CHECK(engine::serialize_safetensors(empty) == expected);

  // F32 [1, 1, 2, 3] = 0..5 named "attn0": 65 JSON bytes padded with 7 spaces to 72.
  SafetensorsFile attn;
  attn.tensors.emplace_back(
      "attn0", raw(SafetensorsDType::F32, {1, 1, 2, 3}, test::le_bytes<float>({0, 1, 2, 3, 4, 5})));
  expected = {72, 0, 0, 0, 0, 0, 0, 0};
  test::append(expected, test::bytes_of(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],)"
                                        R"("data_offsets":[0,24]}}       )"));
  test::append(expected, {0, 0, 0,  0,  0, 0, 128, 63, 0, 0, 0,   64,
                          0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64});
  CHECK(engine::serialize_safetensors(attn) == expected);
}

TEST_CASE("safetensors tensors: save/load f32, f64, i64, views made contiguous", "[io]") {
  test::TempDir dir;
  const std::string path = dir.file("tensors.safetensors");
  // A transposed (non-contiguous) view: [[1, 2, 3], [4, 5, 6]]^T = [[1, 4], [2, 5], [3, 6]].
  const engine::Tensor base = engine::Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  const engine::Tensor weights = base.transpose(0, 1);
  REQUIRE_FALSE(weights.is_contiguous());
  std::map<std::string, engine::Tensor> tensors = {
      {"layer.weight", weights},
      {"layer.bias", engine::Tensor::from_vector({0.1, -0.0}, {2}, engine::DType::F64)},
      {"bn.num_batches_tracked", engine::Tensor::from_indices({12345678901LL}, {})},
      {"empty", engine::Tensor::zeros({0, 4})}};
  engine::save_safetensors(path, tensors, {{"format", "pt"}});

  const auto loaded = engine::load_safetensors(path);
  REQUIRE(loaded.size() == 4);
  const engine::Tensor& w = loaded.at("layer.weight");
  CHECK(w.dtype() == engine::DType::F32);
  CHECK(w.shape() == engine::Shape{3, 2});
  CHECK(w.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  const engine::Tensor& b = loaded.at("layer.bias");
  CHECK(b.dtype() == engine::DType::F64);
  CHECK(b.to_vector()[0] == 0.1);
  CHECK(std::signbit(b.to_vector()[1]));
  const engine::Tensor& n = loaded.at("bn.num_batches_tracked");
  CHECK(n.dtype() == engine::DType::I64);
  CHECK(n.dim() == 0);
  CHECK(n.to_indices() == std::vector<int64_t>{12345678901LL});
  CHECK(loaded.at("empty").shape() == engine::Shape{0, 4});
  CHECK(engine::read_safetensors(path).metadata.at("format") == "pt");
}

TEST_CASE("safetensors tensors: F16 and BF16 widen to f32 exactly, U8 loads as i64", "[io]") {
  SafetensorsFile file;
  // f16: 1.0 = 0x3C00, 65504 = 0x7BFF, 2^-24 = 0x0001, -inf = 0xFC00, -2 = 0xC000.
  file.tensors.emplace_back(
      "h", raw(SafetensorsDType::F16, {5},
               test::le_bytes<uint16_t>({0x3C00, 0x7BFF, 0x0001, 0xFC00, 0xC000})));
  // bf16: 1.0 = 0x3F80, -1.5 = 0xBFC0, 0x7FC0 = NaN.
  file.tensors.emplace_back(
      "b", raw(SafetensorsDType::BF16, {3}, test::le_bytes<uint16_t>({0x3F80, 0xBFC0, 0x7FC0})));
  file.tensors.emplace_back("u", raw(SafetensorsDType::U8, {2}, {3, 250}));
  test::TempDir dir;
  engine::write_safetensors(dir.file("half.safetensors"), file);
  const auto loaded = engine::load_safetensors(dir.file("half.safetensors"));

  const engine::Tensor& h = loaded.at("h");
  CHECK(h.dtype() == engine::DType::F32);
  CHECK(h.to_vector() == std::vector<double>{1.0, 65504.0, std::ldexp(1.0, -24), -INFINITY, -2.0});
  const std::vector<double> b = loaded.at("b").to_vector();
  CHECK(b[0] == 1.0);
  CHECK(b[1] == -1.5);
  CHECK(std::isnan(b[2]));
  CHECK(loaded.at("u").dtype() == engine::DType::I64);
  CHECK(loaded.at("u").to_indices() == std::vector<int64_t>{3, 250});
}

TEST_CASE("safetensors errors: a corpus of malformed files, each naming the file", "[io]") {
  const std::string one = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string two = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  const std::vector<uint8_t> eight(8, 0), twelve(12, 0);
  const std::vector<uint8_t> valid_one = st_bytes(one, eight);

  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* message;
  };
  const std::vector<Case> corpus = {
      {"empty file", {}, "shorter than the 8-byte header length"},
      {"shorter than 8 bytes", {1, 0, 0}, "shorter than the 8-byte header length"},
      {"truncated inside the header",
       std::vector<uint8_t>(valid_one.begin(), valid_one.begin() + 30), "beyond the end"},
      {"truncated inside the data", std::vector<uint8_t>(valid_one.begin(), valid_one.end() - 3),
       "truncated"},
      {"header length 2^40", st_bytes(one, eight, int64_t{1} << 40), "HeaderTooLarge"},
      {"header length beyond the file", st_bytes(one, eight, 1000), "beyond the end"},
      {"header length 0", st_bytes("", {}, 0), "does not start with '{'"},
      {"overlapping offsets",
       st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                eight),
       "overlaps"},
      {"hole between tensors",
       st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                twelve),
       "hole"},
      {"hole at the start",
       st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight), "hole"},
      {"trailing bytes after the tensors", st_bytes(one, twelve), "unused trailing bytes"},
      {"wrong size for the dtype",
       st_bytes(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", eight), "needs 16"},
      {"end before begin",
       st_bytes(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", eight),
       "end before begin"},
      {"unknown dtype",
       st_bytes(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", eight),
       "unknown dtype \"F33\""},
      {"unsupported dtype",
       st_bytes(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", eight),
       "unsupported dtype \"I32\""},
      {"duplicate tensor key",
       st_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                R"("a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                eight),
       "duplicate key \"a\""},
      {"duplicate inner key",
       st_bytes(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
       "duplicate key \"dtype\""},
      {"negative shape",
       st_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "non-negative"},
      {"fractional shape",
       st_bytes(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight), "integers"},
      {"shape not a list",
       st_bytes(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", eight),
       "\"shape\" must be a list"},
      {"numel overflow",
       st_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                eight),
       "more elements than fit"},
      {"bytes overflow",
       st_bytes(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})",
                eight),
       "too large in bytes"},
      {"missing data_offsets", st_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
       "missing \"data_offsets\""},
      {"data_offsets of three",
       st_bytes(R"({"a":{"dtype":"F32","shape":[2],)"
                R"("data_offsets":[0,4,8]}})",
                eight),
       "[begin, end]"},
      {"tensor info not an object", st_bytes(R"({"a":[1,2]})"), "expected an object"},
      {"non-object JSON (a list)", st_bytes("[1,2,3]"), "does not start with '{'"},
      {"non-object JSON (a string)", st_bytes("\"abc\"   "), "does not start with '{'"},
      {"invalid JSON", st_bytes(R"({"a":{"dtype":"F32",)"), "not valid JSON"},
      {"invalid UTF-8 in a name",
       st_bytes("{\"\xff\xfe\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}"),
       "not valid JSON"},
      {"deeply nested JSON (no recursion blow-up)",
       st_bytes("{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}"),
       "expected an object"},
      {"metadata value not a string", st_bytes(R"({"__metadata__":{"epoch":3}})"),
       "must map to a string"},
      {"metadata not an object", st_bytes(R"({"__metadata__":[1]})"),
       "\"__metadata__\" must be an object"},
  };
  REQUIRE(corpus.size() >= 8);

  test::TempDir dir;
  int index = 0;
  for (const Case& c : corpus) {
    const std::string path = dir.file("bad_" + std::to_string(index++) + ".safetensors");
    test::write_bytes(path, c.bytes);
    INFO("case: " << c.what);
    REQUIRE_THROWS_AS(engine::read_safetensors(path), engine::Error);
    REQUIRE_THROWS_WITH(engine::read_safetensors(path), Catch::Contains(path));
    REQUIRE_THROWS_WITH(engine::read_safetensors(path), Catch::Contains(c.message));
    REQUIRE_THROWS_WITH(engine::load_safetensors(path), Catch::Contains(path));
    REQUIRE_THROWS_WITH(engine::parse_safetensors(c.bytes.data(), c.bytes.size(), "in-memory"),
                        Catch::Contains("in-memory") && Catch::Contains(c.message));
  }
}

TEST_CASE("safetensors errors: every truncation and every single-byte corruption is handled",
          "[io]") {
  const std::vector<uint8_t> valid = engine::serialize_safetensors(awkward_file());
  for (std::size_t length = 0; length < valid.size(); ++length) {
    INFO("truncated to " << length << " bytes");
    REQUIRE_THROWS_AS(engine::parse_safetensors(valid.data(), length, "cut"), engine::Error);
  }
  // A corrupted byte either still parses (e.g. inside tensor data) or gives engine::Error.
  for (std::size_t i = 0; i < valid.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::vector<uint8_t> bytes = valid;
      bytes[i] ^= flip;
      try {
        engine::parse_safetensors(bytes.data(), bytes.size(), "flip");
      } catch (const engine::Error&) {
      }
    }
  }
}

TEST_CASE("safetensors errors: unreadable paths and invalid tensors to write", "[io]") {
  test::TempDir dir;
  const std::string missing = dir.file("missing.safetensors");
  REQUIRE_THROWS_WITH(engine::read_safetensors(missing),
                      Catch::Contains(missing) && Catch::Contains("cannot open"));
  REQUIRE_THROWS_WITH(engine::read_safetensors(dir.file("")), Catch::Contains("not a regular"));

  const std::string path = dir.file("out.safetensors");
  SafetensorsFile wrong_size;
  wrong_size.tensors.emplace_back("w", raw(SafetensorsDType::F32, {3}, {0, 0, 0, 0}));
  REQUIRE_THROWS_WITH(engine::write_safetensors(path, wrong_size),
                      Catch::Contains(path) && Catch::Contains("'w'") && Catch::Contains("12"));
  SafetensorsFile duplicate;
  duplicate.tensors.emplace_back("w", raw(SafetensorsDType::U8, {1}, {1}));
  duplicate.tensors.emplace_back("w", raw(SafetensorsDType::U8, {1}, {2}));
  REQUIRE_THROWS_WITH(engine::write_safetensors(path, duplicate), Catch::Contains("duplicate"));
  SafetensorsFile reserved;
  reserved.tensors.emplace_back("__metadata__", raw(SafetensorsDType::U8, {1}, {1}));
  REQUIRE_THROWS_WITH(engine::write_safetensors(path, reserved), Catch::Contains("__metadata__"));
  CHECK_FALSE(std::filesystem::exists(path));  // nothing half-written
  CHECK_FALSE(std::filesystem::exists(engine::detail::atomic_temp_path(path)));

  REQUIRE_THROWS_WITH(engine::save_safetensors(path, {{"t", engine::Tensor()}}),
                      Catch::Contains("'t'") && Catch::Contains("undefined"));
}

TEST_CASE("safetensors write: atomic, the temp file is gone, an old file is replaced whole",
          "[io]") {
  test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::string temp = engine::detail::atomic_temp_path(path);

  SafetensorsFile big;
  big.tensors.emplace_back("w", raw(SafetensorsDType::U8, {4096}, std::vector<uint8_t>(4096, 9)));
  engine::write_safetensors(path, big);
  CHECK_FALSE(std::filesystem::exists(temp));
  const std::vector<uint8_t> big_bytes = test::read_bytes(path);

  // A smaller file replaces the larger one entirely (no stale tail).
  SafetensorsFile small;
  small.tensors.emplace_back("v", raw(SafetensorsDType::U8, {2}, {1, 2}));
  engine::write_safetensors(path, small);
  CHECK_FALSE(std::filesystem::exists(temp));
  CHECK(test::read_bytes(path) == engine::serialize_safetensors(small));
  require_same(engine::read_safetensors(path), small);

  // A failing write leaves the previous file untouched.
  SafetensorsFile invalid;
  invalid.tensors.emplace_back("w", raw(SafetensorsDType::F64, {1}, {1, 2, 3}));
  REQUIRE_THROWS_AS(engine::write_safetensors(path, invalid), engine::Error);
  CHECK(test::read_bytes(path) == engine::serialize_safetensors(small));
  CHECK_FALSE(std::filesystem::exists(temp));

  // The writer object itself: without commit() nothing reaches the path and the temp goes away.
  {
    engine::detail::AtomicFileWriter writer(path);
    writer.write("junk", 4);
    CHECK(std::filesystem::exists(temp));
  }
  CHECK_FALSE(std::filesystem::exists(temp));
  CHECK(test::read_bytes(path) == engine::serialize_safetensors(small));
  (void)big_bytes;
}

TEST_CASE("safetensors tensors: CUDA tensors are saved through a host copy", "[io][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  test::TempDir dir;
  const std::string path = dir.file("cuda.safetensors");
  const engine::Tensor host = engine::Tensor::from_vector({1.5, -2.0, 3.25, 0.0}, {2, 2});
  engine::save_safetensors(path, {{"w", host.to(engine::Device::cuda()).transpose(0, 1)}});
  const engine::Tensor loaded = engine::load_safetensors(path).at("w");
  CHECK(loaded.device().is_cpu());
  CHECK(loaded.to_vector() == std::vector<double>{1.5, 3.25, -2.0, 0.0});
}
