// .npy reader/writer: hand-built bytes, bit-exact round trips of every dtype, the Tensor level,
// malformed files (each an engine::Error naming the file) and the atomic write.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/file_io.h"
#include "engine/io/npy.h"
#include "tests/io/io_test_util.h"
#include "tests/support/cuda_guard.h"

using engine::NpyArray;
using engine::NpyDType;

namespace {

// "\x93NUMPY" major minor, the header length (u16 for 1.x, u32 otherwise), then the header.
std::vector<uint8_t> npy_bytes(int major, const std::string& header,
                               const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i)
    out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  test::append(out, test::bytes_of(header));
  test::append(out, data);
  return out;
}

NpyArray array(NpyDType dtype, engine::Shape shape, std::vector<uint8_t> bytes) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes = std::move(bytes);
  return a;
}

void require_same(const NpyArray& got, const NpyArray& expected) {
  CHECK(got.dtype == expected.dtype);
  CHECK(got.shape == expected.shape);
  CHECK(got.bytes == expected.bytes);
}

}  // namespace

TEST_CASE("npy parse: hand-built bytes of a float32 array (2,) = {1, 2}", "[io]") {
  // The dict "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" is 57 characters:
  //   "{'descr': '<f4', " 17 + "'fortran_order': False, " 24 + "'shape': (2,), " 15 + "}" 1.
  // NumPy adds 21 - len("2") = 20 growth spaces, then pads so that 10 + header is a multiple of
  // 64: 10 + 57 + 20 + 1 ('\n') = 88 -> 40 more spaces; header length 57 + 60 + 1 = 118 = 0x76.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  REQUIRE(dict.size() == 57);
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 0x01, 0x00, 0x76, 0x00};
  test::append(bytes, test::bytes_of(dict + std::string(60, ' ') + "\n"));
  test::append(bytes, {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40});  // 1.0f, 2.0f
  REQUIRE(bytes.size() == 128 + 8);

  const NpyArray parsed = engine::parse_npy(bytes.data(), bytes.size(), "tiny.npy");
  require_same(parsed, array(NpyDType::F32, {2}, {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40}));
  CHECK(engine::serialize_npy(parsed) == bytes);  // our writer: NumPy's exact bytes

  test::TempDir dir;
  test::write_bytes(dir.file("tiny.npy"), bytes);
  const engine::Tensor t = engine::load_npy(dir.file("tiny.npy"));
  CHECK(t.dtype() == engine::DType::F32);
  CHECK(t.shape() == engine::Shape{2});
  CHECK(t.to_vector() == std::vector<double>{1.0, 2.0});
}

TEST_CASE("npy parse: older and newer headers (16-byte padding, versions 2.0 and 3.0)", "[io]") {
  // NumPy < 1.24 wrote no growth spaces; early versions aligned to 16 bytes. Python 2 wrote 3L.
  const std::string old = "{'descr': '<i8', 'fortran_order': False, 'shape': (1L, 2L), }  \n";
  auto bytes = npy_bytes(1, old, test::le_bytes<int64_t>({-5, 7}));
  require_same(engine::parse_npy(bytes.data(), bytes.size(), "old.npy"),
               array(NpyDType::I64, {1, 2}, test::le_bytes<int64_t>({-5, 7})));

  const std::string loose = "{\"shape\":(),\"fortran_order\":False,\"descr\":\"<f8\"}\n";
  for (int major : {2, 3}) {
    bytes = npy_bytes(major, loose, test::le_bytes<double>({0.5}));
    require_same(engine::parse_npy(bytes.data(), bytes.size(), "v2.npy"),
                 array(NpyDType::F64, {}, test::le_bytes<double>({0.5})));
  }
}

TEST_CASE("npy round trip: every dtype bit-exact, scalars and empty arrays", "[io]") {
  const std::vector<NpyArray> arrays = {
      array(NpyDType::F32, {2, 3},
            test::le_bytes<uint32_t>(
                {0x7FC00001u, 0xFFA00005u, 0x80000000u, 0x7F800000u, 0x00000001u, 0x3F800000u})),
      array(NpyDType::F64, {3},
            test::le_bytes<uint64_t>({0x7FF8000000000123ull, 0x8000000000000000ull, 1ull})),
      array(NpyDType::I64, {2, 1}, test::le_bytes<int64_t>({INT64_MIN, INT64_MAX})),
      array(NpyDType::I32, {3}, test::le_bytes<int32_t>({INT32_MIN, -1, INT32_MAX})),
      array(NpyDType::U8, {2, 2}, {0, 1, 128, 255}),
      array(NpyDType::F32, {}, test::le_bytes<float>({-0.0f})),
      array(NpyDType::F64, {0}, {}),
      array(NpyDType::I64, {3, 0, 2}, {}),
      // A 12,345-digit-wide first dimension still gets growth spaces (21 - 5 digits).
      array(NpyDType::U8, {12345}, std::vector<uint8_t>(12345, 3)),
  };
  test::TempDir dir;
  int index = 0;
  for (const NpyArray& a : arrays) {
    INFO("array " << index);
    const std::string path = dir.file("a" + std::to_string(index++) + ".npy");
    engine::write_npy(path, a);
    require_same(engine::read_npy(path), a);
    const std::vector<uint8_t> bytes = test::read_bytes(path);
    CHECK(bytes == engine::serialize_npy(a));
    require_same(engine::parse_npy(bytes.data(), bytes.size(), path), a);
    const uint16_t header_length = static_cast<uint16_t>(bytes[8] | (bytes[9] << 8));
    CHECK((10 + header_length) % 64 == 0);  // data aligned to 64 bytes
    CHECK(bytes[9 + header_length] == '\n');
  }
}

TEST_CASE("npy write: a header too long for 16 bits is written as version 2.0", "[io]") {
  // 22,000 dimensions of 1 make a ~66,000-character header (> 65,535).
  const NpyArray a = array(NpyDType::U8, engine::Shape(22000, 1), {42});
  const std::vector<uint8_t> bytes = engine::serialize_npy(a);
  CHECK(bytes[6] == 2);
  CHECK(bytes[7] == 0);
  require_same(engine::parse_npy(bytes.data(), bytes.size(), "wide.npy"), a);
}

TEST_CASE("npy tensors: save/load f32, f64, i64, scalars; i4 and u1 load as i64", "[io]") {
  test::TempDir dir;
  // Transposed view [[1, 2, 3], [4, 5, 6]]^T = [[1, 4], [2, 5], [3, 6]], saved in C order.
  const engine::Tensor view =
      engine::Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  engine::save_npy(dir.file("view.npy"), view);
  const engine::Tensor v = engine::load_npy(dir.file("view.npy"));
  CHECK(v.dtype() == engine::DType::F32);
  CHECK(v.shape() == engine::Shape{3, 2});
  CHECK(v.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});

  engine::save_npy(dir.file("f64.npy"), engine::Tensor::scalar(0.1, engine::DType::F64));
  const engine::Tensor s = engine::load_npy(dir.file("f64.npy"));
  CHECK(s.dtype() == engine::DType::F64);
  CHECK(s.dim() == 0);
  CHECK(s.item() == 0.1);

  engine::save_npy(dir.file("labels.npy"), engine::Tensor::from_indices({4, -1, 9}, {3}));
  const engine::Tensor labels = engine::load_npy(dir.file("labels.npy"));
  CHECK(labels.dtype() == engine::DType::I64);
  CHECK(labels.to_indices() == std::vector<int64_t>{4, -1, 9});
  CHECK(engine::read_npy(dir.file("labels.npy")).dtype == NpyDType::I64);

  engine::write_npy(dir.file("i4.npy"),
                    array(NpyDType::I32, {2}, test::le_bytes<int32_t>({-7, 8})));
  const engine::Tensor i4 = engine::load_npy(dir.file("i4.npy"));
  CHECK(i4.dtype() == engine::DType::I64);
  CHECK(i4.to_indices() == std::vector<int64_t>{-7, 8});

  engine::write_npy(dir.file("u1.npy"), array(NpyDType::U8, {1, 2}, {0, 255}));
  const engine::Tensor u1 = engine::load_npy(dir.file("u1.npy"));
  CHECK(u1.dtype() == engine::DType::I64);
  CHECK(u1.shape() == engine::Shape{1, 2});
  CHECK(u1.to_indices() == std::vector<int64_t>{0, 255});

  engine::save_npy(dir.file("empty.npy"), engine::Tensor::zeros({0, 5}));
  CHECK(engine::load_npy(dir.file("empty.npy")).shape() == engine::Shape{0, 5});
}

TEST_CASE("npy errors: malformed files, each naming the file", "[io]") {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::vector<uint8_t> eight(8, 0);
  const std::vector<uint8_t> valid = npy_bytes(1, f4, eight);
  auto with = [&](const std::string& header,
                  const std::vector<uint8_t>& data = {0, 0, 0, 0, 0, 0, 0, 0}) {
    return npy_bytes(1, header, data);
  };

  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* message;
  };
  std::vector<uint8_t> bad_magic = valid;
  bad_magic[1] = 'X';
  std::vector<uint8_t> bad_version = valid;
  bad_version[6] = 4;
  const std::vector<Case> corpus = {
      {"empty file", {}, "bad magic"},
      {"bad magic", bad_magic, "bad magic"},
      {"a safetensors file", {8, 0, 0, 0, 0, 0, 0, 0, '{', '}'}, "bad magic"},
      {"truncated after the magic", {0x93, 'N', 'U', 'M', 'P', 'Y'}, "no version"},
      {"truncated in the length", {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 10}, "no header length"},
      {"unsupported version", bad_version, "version 4.0"},
      {"truncated inside the header", std::vector<uint8_t>(valid.begin(), valid.begin() + 40),
       "beyond the end"},
      {"truncated inside the data", std::vector<uint8_t>(valid.begin(), valid.end() - 1),
       "truncated data"},
      {"trailing bytes", npy_bytes(1, f4, std::vector<uint8_t>(9, 0)), "trailing bytes"},
      {"big-endian", with("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"),
       "big-endian"},
      {"unsupported dtype", with("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }"),
       "unsupported dtype '<f2'"},
      {"structured dtype",
       with("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (2,), }"), "structured"},
      {"fortran order", with("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }"),
       "fortran_order"},
      {"negative dimension", with("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"),
       "negative"},
      {"missing shape", with("{'descr': '<f4', 'fortran_order': False, }"),
       "lacks the key 'shape'"},
      {"unknown key", with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
       "unexpected key 'x'"},
      {"duplicate key",
       with("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"),
       "duplicate key 'descr'"},
      {"not a dict", with("['<f4', False, (2,)]"), "expected '{'"},
      {"unterminated string", with("{'descr: '<f4'"), "malformed header"},
      {"bad boolean", with("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }"),
       "True or False"},
      {"garbage after the dict",
       with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x"), "unexpected text"},
      {"numel overflow",
       with("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
       "more elements than fit"},
      {"dimension overflow",
       with("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
       "too large"},
  };
  REQUIRE(corpus.size() >= 8);

  test::TempDir dir;
  int index = 0;
  for (const Case& c : corpus) {
    const std::string path = dir.file("bad_" + std::to_string(index++) + ".npy");
    test::write_bytes(path, c.bytes);
    INFO("case: " << c.what);
    REQUIRE_THROWS_AS(engine::read_npy(path), engine::Error);
    REQUIRE_THROWS_WITH(engine::read_npy(path),
                        Catch::Contains(path) && Catch::Contains(c.message));
    REQUIRE_THROWS_WITH(engine::load_npy(path), Catch::Contains(path));
    REQUIRE_THROWS_WITH(engine::parse_npy(c.bytes.data(), c.bytes.size(), "in-memory"),
                        Catch::Contains("in-memory") && Catch::Contains(c.message));
  }
}

TEST_CASE("npy errors: every truncation and every single-byte corruption is handled", "[io]") {
  const std::vector<uint8_t> valid =
      engine::serialize_npy(array(NpyDType::I32, {2, 2}, test::le_bytes<int32_t>({1, 2, 3, 4})));
  for (std::size_t length = 0; length < valid.size(); ++length) {
    INFO("truncated to " << length << " bytes");
    REQUIRE_THROWS_AS(engine::parse_npy(valid.data(), length, "cut"), engine::Error);
  }
  for (std::size_t i = 0; i < valid.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::vector<uint8_t> bytes = valid;
      bytes[i] ^= flip;
      try {
        engine::parse_npy(bytes.data(), bytes.size(), "flip");
      } catch (const engine::Error&) {
      }
    }
  }
}

TEST_CASE("npy write: atomic, the temp file is gone, an old file is replaced whole", "[io]") {
  test::TempDir dir;
  const std::string path = dir.file("embeddings.npy");
  const std::string temp = engine::detail::atomic_temp_path(path);
  engine::save_npy(path, engine::Tensor::zeros({64, 32}));
  CHECK_FALSE(std::filesystem::exists(temp));
  engine::save_npy(path, engine::Tensor::ones({2}));
  CHECK_FALSE(std::filesystem::exists(temp));
  CHECK(engine::load_npy(path).to_vector() == std::vector<double>{1.0, 1.0});
  CHECK(test::read_bytes(path).size() == 128 + 8);

  // An invalid array throws before touching the old file.
  REQUIRE_THROWS_WITH(engine::write_npy(path, array(NpyDType::F64, {2}, {1, 2, 3})),
                      Catch::Contains(path) && Catch::Contains("needs 16 bytes"));
  CHECK(engine::load_npy(path).to_vector() == std::vector<double>{1.0, 1.0});
  CHECK_FALSE(std::filesystem::exists(temp));
  const std::string missing = dir.file("nope.npy");
  REQUIRE_THROWS_WITH(engine::load_npy(missing), Catch::Contains(missing));
  REQUIRE_THROWS_WITH(engine::save_npy(dir.file("t.npy"), engine::Tensor()),
                      Catch::Contains("undefined"));
}

TEST_CASE("npy row writer: blocks of rows give save_npy's bytes; wrong rows fail, no file",
          "[io]") {
  test::TempDir dir;
  // [5, 2, 3] f32 written as blocks of 2, 0, 2 and 1 rows (the third block a strided view, to
  // check the host copy is contiguous): byte for byte what save_npy writes for the whole array.
  std::vector<double> values(30);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25 * static_cast<double>(i) - 3.0;
  const engine::Tensor whole = engine::Tensor::from_vector(values, {5, 2, 3});
  engine::save_npy(dir.file("whole.npy"), whole);
  {
    engine::NpyRowWriter writer(dir.file("rows.npy"), engine::DType::F32, {5, 2, 3});
    writer.append(whole.slice(0, 0, 2));
    writer.append(whole.slice(0, 2, 2));
    const engine::Tensor transposed = whole.slice(0, 2, 4).transpose(1, 2).contiguous();
    writer.append(transposed.transpose(1, 2));  // rows 2-3, through a non-contiguous view
    CHECK(writer.rows_written() == 4);
    CHECK_FALSE(std::filesystem::exists(dir.file("rows.npy")));  // not before finish()
    writer.append(whole.slice(0, 4, 5));
    writer.finish();
  }
  CHECK(test::read_bytes(dir.file("rows.npy")) == test::read_bytes(dir.file("whole.npy")));

  const std::string path = dir.file("bad.npy");
  {
    engine::NpyRowWriter writer(path, engine::DType::F32, {3, 2});
    REQUIRE_THROWS_WITH(
        writer.append(engine::Tensor::zeros({1, 3})),
        Catch::Contains(path) && Catch::Contains("[1, 3]") && Catch::Contains("[3, 2]"));
    REQUIRE_THROWS_WITH(writer.append(engine::Tensor::zeros({1, 2}, engine::DType::F64)),
                        Catch::Contains(path) && Catch::Contains("f32"));
    writer.append(engine::Tensor::zeros({2, 2}));
    REQUIRE_THROWS_WITH(writer.append(engine::Tensor::zeros({2, 2})),
                        Catch::Contains(path) && Catch::Contains("4 rows would exceed"));
    REQUIRE_THROWS_WITH(writer.finish(),
                        Catch::Contains(path) && Catch::Contains("2 rows written of 3"));
    CHECK_FALSE(std::filesystem::exists(path));
  }
  // Destroyed without a successful finish(): no file and no temporary file left behind.
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(engine::detail::atomic_temp_path(path)));
}

TEST_CASE("npy tensors: CUDA tensors are saved through a host copy", "[io][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  test::TempDir dir;
  const engine::Tensor host = engine::Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  engine::save_npy(dir.file("cuda.npy"), host.to(engine::Device::cuda()).transpose(0, 1));
  const engine::Tensor loaded = engine::load_npy(dir.file("cuda.npy"));
  CHECK(loaded.device().is_cpu());
  CHECK(loaded.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
}
