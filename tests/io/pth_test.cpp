// torch.save reader (engine/io/pth.h): fixtures written by tests/io/make_torch_fixtures.py in
// torch.save's layout (no PyTorch needed; the expected values below are the ones that script
// writes, typed again by hand), the refusals by name, truncated and corrupted files, a hostile
// pickle nested a million levels deep, and a C2F2 loaded from .pth through models::load_weights
// matching the same weights loaded from safetensors.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/io/pth.h"
#include "engine/io/safetensors.h"
#include "engine/io/torch_pickle.h"
#include "models/weights.h"
#include "tests/io/io_test_util.h"
#include "tests/models/helpers.h"

using engine::RawTensor;
using engine::SafetensorsDType;

namespace {

std::string fixture(const std::string& name) {
  return std::string(ENGINE_SOURCE_DIR) + "/tests/io/pth_fixtures/" + name;
}

const RawTensor& find(const engine::PthFile& file, const std::string& name) {
  for (const auto& [tensor_name, tensor] : file.tensors) {
    if (tensor_name == name) return tensor;
  }
  FAIL("no tensor '" << name << "'");
  throw;
}

std::vector<double> values(const RawTensor& raw) {
  return engine::tensor_from_raw(raw).to_vector();
}

std::vector<std::string> names(const engine::PthFile& file) {
  std::vector<std::string> out;
  for (const auto& entry : file.tensors) out.push_back(entry.first);
  return out;
}

}  // namespace

TEST_CASE("pth: a state dict of F32, F16 and I64 tensors", "[io][pth]") {
  const engine::PthFile file = engine::read_pth(fixture("small.pth"));
  CHECK(names(file) == std::vector<std::string>{"weight", "bias", "num_batches_tracked"});
  CHECK(file.state_dict_key.empty());
  CHECK_FALSE(file.removed_module_prefix);

  const RawTensor& weight = find(file, "weight");
  CHECK(weight.dtype == SafetensorsDType::F32);
  CHECK(weight.shape == engine::Shape{2, 3});
  CHECK(values(weight) == std::vector<double>{0.5, -1.0, 2.0, 3.25, 0.0, -4.0});

  const RawTensor& bias = find(file, "bias");
  CHECK(bias.dtype == SafetensorsDType::F16);
  CHECK(bias.bytes == test::le_bytes<uint16_t>({0x3C00, 0xC100}));  // 1.0, -2.5 in binary16
  CHECK(values(bias) == std::vector<double>{1.0, -2.5});

  const RawTensor& counter = find(file, "num_batches_tracked");
  CHECK(counter.dtype == SafetensorsDType::I64);
  CHECK(counter.shape.empty());
  CHECK(values(counter) == std::vector<double>{7});
}

TEST_CASE("pth: strided views, a storage offset, a shared storage, Int and Double", "[io][pth]") {
  const engine::PthFile file = engine::read_pth(fixture("views.pth"));  // folder "views/"
  // matrix, transposed and tail are three views of one storage [1, 2, 3, 4, 5, 6].
  CHECK(values(find(file, "matrix")) == std::vector<double>{1, 2, 3, 4, 5, 6});
  const RawTensor& transposed = find(file, "transposed");  // size (3, 2), stride (1, 3)
  CHECK(transposed.shape == engine::Shape{3, 2});
  CHECK(values(transposed) == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(values(find(file, "tail")) == std::vector<double>{5, 6});  // offset 4
  const RawTensor& counts = find(file, "counts");                  // IntStorage, widened
  CHECK(counts.dtype == SafetensorsDType::I64);
  CHECK(values(counts) == std::vector<double>{1, -2, 3});
  CHECK(find(file, "wide").dtype == SafetensorsDType::F64);
  CHECK(values(find(file, "wide")) == std::vector<double>{0.25});
}

TEST_CASE("pth: a checkpoint dict with 'state_dict' saved through DataParallel", "[io][pth]") {
  const engine::PthFile file = engine::read_pth(fixture("nested.pth"));
  CHECK(file.state_dict_key == "state_dict");
  CHECK(file.removed_module_prefix);
  CHECK(names(file) == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(find(file, "fc.weight").shape == engine::Shape{1, 2});
  CHECK(values(find(file, "fc.weight")) == std::vector<double>{1.5, -2.0});
  CHECK(values(find(file, "fc.bias")) == std::vector<double>{0.75});
}

TEST_CASE("pth: what torch.save's subset excludes is refused by name", "[io][pth]") {
  const auto refused = [](const std::string& name) {
    const std::string path = fixture(name);
    try {
      engine::read_pth(path);
    } catch (const engine::Error& error) {
      const std::string message = error.what();
      CHECK(message.find(name) != std::string::npos);  // names the file
      return message;
    }
    FAIL(name << " was read");
    return std::string();
  };
  CHECK_THAT(refused("deflate.pth"),
             Catch::Contains("'archive/data.pkl' is compressed") && Catch::Contains("DEFLATE"));
  CHECK_THAT(refused("os_system.pth"), Catch::Contains("global os.system is refused"));
  CHECK_THAT(refused("legacy.pth"), Catch::Contains("legacy torch.save format"));
  CHECK_THAT(refused("bool.pth"),
             Catch::Contains("tensor 'mask'") && Catch::Contains("torch.BoolStorage"));
  CHECK_THAT(refused("expanded.pth"),
             Catch::Contains("tensor 'row'") && Catch::Contains("expanded view"));
  CHECK_THAT(refused("big_endian.pth"), Catch::Contains("only little-endian"));
  CHECK_THAT(refused("torchscript.pt"), Catch::Contains("TorchScript archive"));
  CHECK_THAT(refused("no_state_dict.pth"),
             Catch::Contains("holds no state dict") && Catch::Contains("'epoch', 'state_dict'"));
  CHECK_THAT(refused("outside.pth"),
             Catch::Contains("tensor 'late'") && Catch::Contains("outside its storage of 2"));
}

TEST_CASE("pth: every truncation and every corrupted byte is an error, never a crash",
          "[io][pth]") {
  const std::vector<uint8_t> bytes = test::read_bytes(fixture("small.pth"));
  REQUIRE(bytes.size() > 1000);
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    CHECK_THROWS_AS(engine::parse_pth(bytes.data(), length, "cut.pth"), engine::Error);
  }
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    std::vector<uint8_t> corrupt = bytes;
    corrupt[at] ^= 0xFF;
    try {
      engine::parse_pth(corrupt.data(), corrupt.size(), "corrupt.pth");
    } catch (const engine::Error&) {
    }
  }
  const engine::PthFile file = engine::parse_pth(bytes.data(), bytes.size(), "whole.pth");
  CHECK(file.tensors.size() == 3);
}

TEST_CASE("pth: the pickle reader has no recursion and names what it refuses", "[io][pth]") {
  // ] then 999,999 TUPLE1: a list inside 999,999 nested 1-tuples, kMaxPickleObjects in all.
  std::string deep = "\x80\x02]";
  deep += std::string(engine::detail::kMaxPickleObjects - 1, '\x85');
  deep += ".";
  const engine::detail::PickleData nested = engine::detail::read_torch_pickle(
      reinterpret_cast<const uint8_t*>(deep.data()), deep.size(), "x");
  CHECK(nested.objects.size() == 1000000);
  CHECK(nested.objects[nested.root].kind == engine::detail::PickleKind::Tuple);
  deep.insert(3, "\x85");  // one object more
  CHECK_THROWS_WITH(engine::detail::read_torch_pickle(reinterpret_cast<const uint8_t*>(deep.data()),
                                                      deep.size(), "x"),
                    Catch::Contains("more than 1000000 objects"));

  const auto error_of = [](const std::string& program) {
    try {
      engine::detail::read_torch_pickle(reinterpret_cast<const uint8_t*>(program.data()),
                                        program.size(), "f.pth: archive/data.pkl");
    } catch (const engine::Error& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  CHECK_THAT(error_of("\x80\x02(i__main__\nX\n."), Catch::Contains("opcode INST (0x69)"));
  CHECK_THAT(error_of("\x80\x02h\x05."), Catch::Contains("memo key 5 was never stored"));
  CHECK_THAT(error_of("\x80\x02}"), Catch::Contains("truncated"));
  CHECK_THAT(error_of("\x80\x02"
                      "ctorch.storage\n_load_from_bytes\n."),
             Catch::Contains("torch.storage._load_from_bytes is refused"));
  CHECK_THAT(error_of("\x80\x02"
                      "cbuiltins\neval\n."),
             Catch::Contains("f.pth: archive/data.pkl byte 2: global builtins.eval is refused"));
  CHECK(engine::detail::read_torch_pickle(
            reinterpret_cast<const uint8_t*>("\x80\x02\x8a\x02\x00\x80."), 7, "x")
            .objects[0]
            .integer == -32768);  // LONG1, two's complement
}

TEST_CASE("pth: a file is read as torch.save by its extension or its zip signature", "[io][pth]") {
  test::TempDir dir;
  CHECK(engine::is_torch_checkpoint_path(dir.file("resnet18-f37072fd.pth")));
  CHECK(engine::is_torch_checkpoint_path(dir.file("epoch=3-step=100.ckpt")));
  CHECK_FALSE(engine::is_torch_checkpoint_path(dir.file("model.safetensors")));
  const std::string zipped = dir.file("weights.data");
  test::write_bytes(zipped, test::read_bytes(fixture("small.pth")));
  CHECK(engine::is_torch_checkpoint_path(zipped));
  const std::string other = dir.file("other.data");
  engine::save_safetensors(other, {{"x", engine::Tensor::zeros({1})}});
  CHECK_FALSE(engine::is_torch_checkpoint_path(other));
}

// c2f2_partial.pth holds conv1 and fc2 of C2F2 (embedding_dim 2), element i of each tensor being
// ((37 i) mod 101 - 50) / 64; conv2 and fc1 come from the model (keep_prefixes), as with dml
// train's model.pretrained_skip.
TEST_CASE("pth: C2F2 weights load from .pth exactly as from safetensors", "[io][pth]") {
  const auto value = [](int64_t i) { return static_cast<double>((i * 37) % 101 - 50) / 64.0; };
  std::map<std::string, engine::Tensor> same;
  for (const auto& [name, shape] :
       std::vector<std::pair<std::string, engine::Shape>>{{"conv1.weight", {32, 1, 5, 5}},
                                                          {"conv1.bias", {32}},
                                                          {"fc2.weight", {2, 1024}},
                                                          {"fc2.bias", {2}}}) {
    std::vector<double> data(static_cast<std::size_t>(engine::shape_numel(shape)));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = value(static_cast<int64_t>(i));
    same[name] = engine::Tensor::from_vector(data, shape);
  }
  test::TempDir dir;
  const std::string safetensors = dir.file("same.safetensors");
  engine::save_safetensors(safetensors, same);

  models::WeightLoadOptions keep;
  keep.keep_prefixes = {"conv2.", "fc1."};
  auto from_pth = models_test::build_model(5, "c2f2", 2);
  auto from_safetensors = models_test::build_model(5, "c2f2", 2);
  models::load_weights(*from_pth, fixture("c2f2_partial.pth"), keep);
  models::load_weights(*from_safetensors, safetensors, keep);

  const engine::nn::StateDict loaded = from_pth->state_dict();
  const engine::nn::StateDict expected = from_safetensors->state_dict();
  REQUIRE(loaded.keys() == expected.keys());
  for (const std::string& name : expected.keys()) {
    CHECK(loaded.at(name).to_vector() == expected.at(name).to_vector());
  }
  const std::vector<double> conv1 = loaded.at("conv1.weight").to_vector();
  CHECK(conv1[0] == -0.78125);   // (0 - 50) / 64
  CHECK(conv1[1] == -0.203125);  // (37 - 50) / 64
  CHECK(conv1[3] == -0.625);     // (111 mod 101 - 50) / 64
  CHECK(loaded.at("fc2.bias").to_vector() == std::vector<double>{-0.78125, -0.203125});

  // A mismatch names the .pth file, as for safetensors.
  auto wrong = models_test::build_model(5, "c2f2", 3);
  REQUIRE_THROWS_WITH(models::load_weights(*wrong, fixture("c2f2_partial.pth"), keep),
                      Catch::Contains("c2f2_partial.pth") && Catch::Contains("'fc2.weight'"));
}
