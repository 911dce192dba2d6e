// Module: recursive names, modes, zero_grad, in-place moves, state_dict / load_state_dict.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/nn/nn.h"
#include "engine/ops.h"
#include "engine/optim/sgd.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"

using engine::DType;
using engine::Tensor;
namespace nn = engine::nn;

namespace {

// conv -> bn -> relu, named like a torchvision BasicBlock's first half.
class Block : public nn::Module {
 public:
  explicit Block(int64_t channels) {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(channels, channels, 3, 1, 1, 1,
                                                                  /*bias=*/false));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(channels));
  }
  Tensor forward(const Tensor& x) override { return engine::relu(bn1->forward(conv1->forward(x))); }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
};

class Net : public nn::Module {
 public:
  Net() {
    layer1 = register_module("layer1", std::make_shared<nn::Sequential>());
    layer1->push_back(std::make_shared<Block>(2));
    layer1->push_back(std::make_shared<Block>(2));
    pool = register_module("pool", std::make_shared<nn::AdaptiveAvgPool2d>());
    fc = register_module("fc", std::make_shared<nn::Linear>(2, 3));
  }
  Tensor forward(const Tensor& x) override {
    return fc->forward(pool->forward(layer1->forward(x)).flatten(1));
  }

  std::shared_ptr<nn::Sequential> layer1;
  std::shared_ptr<nn::AdaptiveAvgPool2d> pool;
  std::shared_ptr<nn::Linear> fc;
};

// Exposes the protected registration functions.
class Open : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  using nn::Module::register_buffer;
  using nn::Module::register_module;
  using nn::Module::register_parameter;
};

template <typename Pairs>
std::vector<std::string> names_of(const Pairs& pairs) {
  std::vector<std::string> names;
  for (const auto& entry : pairs) names.push_back(entry.first);
  return names;
}

}  // namespace

TEST_CASE("module: names are recursive, e.g. layer1.0.conv1.weight", "[module]") {
  Net net;
  CHECK(names_of(net.named_parameters()) ==
        std::vector<std::string>{"layer1.0.conv1.weight", "layer1.0.bn1.weight",
                                 "layer1.0.bn1.bias", "layer1.1.conv1.weight",
                                 "layer1.1.bn1.weight", "layer1.1.bn1.bias", "fc.weight",
                                 "fc.bias"});
  CHECK(names_of(net.named_buffers()) ==
        std::vector<std::string>{"layer1.0.bn1.running_mean", "layer1.0.bn1.running_var",
                                 "layer1.0.bn1.num_batches_tracked", "layer1.1.bn1.running_mean",
                                 "layer1.1.bn1.running_var", "layer1.1.bn1.num_batches_tracked"});
  CHECK(names_of(net.named_modules()) ==
        std::vector<std::string>{"", "layer1", "layer1.0", "layer1.0.conv1", "layer1.0.bn1",
                                 "layer1.1", "layer1.1.conv1", "layer1.1.bn1", "pool", "fc"});
  // 2 convs 2*2*3*3, 2 BNs 2 + 2, fc 3*2 + 3.
  CHECK(net.parameter_count() == 2 * 36 + 2 * 4 + 9);
  for (const Tensor& p : net.parameters()) CHECK(p.requires_grad());
}

TEST_CASE("module: state_dict lists parameters, then buffers, then children", "[module]") {
  Net net;
  CHECK(net.state_dict().keys() ==
        std::vector<std::string>{
            "layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
            "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var",
            "layer1.0.bn1.num_batches_tracked", "layer1.1.conv1.weight", "layer1.1.bn1.weight",
            "layer1.1.bn1.bias", "layer1.1.bn1.running_mean", "layer1.1.bn1.running_var",
            "layer1.1.bn1.num_batches_tracked", "fc.weight", "fc.bias"});
  for (const auto& entry : net.state_dict()) CHECK_FALSE(entry.second.requires_grad());
}

TEST_CASE("module: state_dict tensors share memory with the module", "[module]") {
  nn::Linear linear(2, 2);
  Tensor view = linear.state_dict().at("weight");
  view.fill_(3.0);
  test::require_close(linear.weight(), {3.0, 3.0, 3.0, 3.0}, 0, 0, "weight through the view");
}

TEST_CASE("module: state_dict round trip reproduces the model", "[module]") {
  engine::manual_seed(1);
  Net source;
  engine::manual_seed(2);
  Net target;
  source.train();
  Tensor x = engine::normal({2, 2, 4, 4}, 0.0, 1.0, engine::default_generator());
  source.forward(x);  // moves BN running statistics and counters away from their initial values
  target.load_state_dict(source.state_dict());
  for (const auto& entry : source.state_dict()) {
    INFO(entry.first);
    test::require_close(target.state_dict().at(entry.first), entry.second, 0, 0, entry.first);
  }
  source.eval();
  target.eval();
  test::require_close(target.forward(x), source.forward(x), 0, 0, "outputs");
}

TEST_CASE("module: load_state_dict reports every missing, unexpected and mis-shaped key",
          "[module]") {
  Net net;
  Tensor fc_before = net.fc->weight().clone();
  nn::StateDict state = net.state_dict();
  state.erase("layer1.0.conv1.weight");
  state.erase("layer1.1.bn1.running_var");
  state.insert("layer1.2.conv1.weight", Tensor::zeros({2, 2, 3, 3}));
  state.insert("head.bias", Tensor::zeros({3}));
  state.set("fc.weight", Tensor::zeros({4, 2}));
  state.set("layer1.0.bn1.bias", Tensor::zeros({3}));
  try {
    net.load_state_dict(state);
    FAIL("a bad state dict was accepted");
  } catch (const engine::Error& e) {
    std::string message = e.what();
    INFO(message);
    CHECK_THAT(message, Catch::Contains("load_state_dict"));
    CHECK_THAT(message, Catch::Contains("missing keys (2)"));
    CHECK_THAT(message, Catch::Contains("'layer1.0.conv1.weight'"));
    CHECK_THAT(message, Catch::Contains("'layer1.1.bn1.running_var'"));
    CHECK_THAT(message, Catch::Contains("unexpected keys (2)"));
    CHECK_THAT(message, Catch::Contains("'layer1.2.conv1.weight'"));
    CHECK_THAT(message, Catch::Contains("'head.bias'"));
    CHECK_THAT(message, Catch::Contains("mis-shaped keys (2)"));
    CHECK_THAT(message, Catch::Contains("'fc.weight' (expected [3, 2], got [4, 2])"));
    CHECK_THAT(message, Catch::Contains("'layer1.0.bn1.bias' (expected [2], got [3])"));
  }
  // Nothing was copied.
  test::require_close(net.fc->weight(), fc_before, 0, 0, "fc.weight after the failed load");
}

TEST_CASE("module: non-strict load tolerates missing and unexpected keys only", "[module]") {
  nn::Linear linear(2, 3);
  nn::StateDict state;
  state.insert("weight", Tensor::ones({3, 2}));
  state.insert("extra", Tensor::ones({1}));
  REQUIRE_THROWS_WITH(linear.load_state_dict(state), Catch::Contains("'bias'"));
  linear.load_state_dict(state, /*strict=*/false);
  test::require_close(linear.weight(), std::vector<double>(6, 1.0), 0, 0, "weight");
  state.set("weight", Tensor::ones({2, 3}));
  REQUIRE_THROWS_WITH(linear.load_state_dict(state, false), Catch::Contains("mis-shaped"));
}

TEST_CASE("module: load_state_dict converts dtypes", "[module]") {
  nn::Linear linear(1, 1);
  linear.load_state_dict({{"weight", Tensor::from_vector({2.5}, {1, 1}, DType::F64)},
                          {"bias", Tensor::from_vector({-1.0}, {1}, DType::F64)}});
  CHECK(linear.weight().dtype() == DType::F32);
  test::require_close(linear.weight(), {2.5}, 0, 0, "weight");
  test::require_close(linear.bias(), {-1.0}, 0, 0, "bias");
}

TEST_CASE("module: train and eval propagate to every descendant", "[module]") {
  Net net;
  for (const auto& entry : net.named_modules()) CHECK(entry.second->is_training());
  net.eval();
  for (const auto& entry : net.named_modules()) CHECK_FALSE(entry.second->is_training());
  net.train();
  for (const auto& entry : net.named_modules()) CHECK(entry.second->is_training());
  net.layer1->train(false);
  CHECK(net.is_training());
  CHECK_FALSE(net.layer1->is_training());
  CHECK_FALSE(net.layer1->named_modules().back().second->is_training());
  CHECK(net.fc->is_training());
}

TEST_CASE("module: zero_grad resets every gradient to undefined", "[module]") {
  Net net;
  Tensor x = engine::normal({2, 2, 3, 3}, 0.0, 1.0, engine::default_generator());
  engine::backward(engine::sum(net.forward(x)));
  for (const Tensor& p : net.parameters()) REQUIRE(p.grad().defined());
  net.zero_grad();
  for (const Tensor& p : net.parameters()) REQUIRE_FALSE(p.grad().defined());
}

TEST_CASE("module: to(dtype) converts in place, keeping optimizer handles valid", "[module]") {
  nn::Linear linear(2, 1);
  linear.load_state_dict({{"weight", Tensor::from_vector({1.0, -1.0}, {1, 2})},
                          {"bias", Tensor::from_vector({0.5}, {1})}});
  engine::optim::SgdOptions options;
  options.lr = 0.5;
  engine::optim::Sgd sgd(linear.parameters(), options);  // built before the move
  Tensor weight_handle = linear.weight();

  linear.to(DType::F64);
  CHECK(weight_handle.dtype() == DType::F64);
  for (const auto& entry : linear.state_dict()) CHECK(entry.second.dtype() == DType::F64);
  CHECK(weight_handle.requires_grad());

  // y = x . w + b with x = (2, 3): dy/dw = x, dy/db = 1.
  Tensor x = Tensor::from_vector({2.0, 3.0}, {1, 2}, DType::F64);
  engine::backward(engine::sum(linear.forward(x)));
  sgd.step();
  test::require_close(linear.weight(), {1.0 - 0.5 * 2.0, -1.0 - 0.5 * 3.0}, 1e-15, 0, "weight");
  test::require_close(linear.bias(), {0.5 - 0.5}, 1e-15, 0, "bias");

  // Gradients move with their parameters.
  linear.to(DType::F32);
  CHECK(linear.weight().grad().dtype() == DType::F32);
}

TEST_CASE("module: I64 buffers stay as they are when the module converts", "[module]") {
  nn::BatchNorm1d bn(3);
  bn.to(DType::F64);
  CHECK(bn.running_mean().dtype() == DType::F64);
  CHECK(bn.num_batches_tracked().dtype() == DType::I64);
}

TEST_CASE("module: a module registered twice contributes its parameters once", "[module]") {
  Open outer;
  auto shared = std::make_shared<nn::Linear>(2, 2);
  outer.register_module("a", shared);
  outer.register_module("b", shared);
  CHECK(outer.parameters().size() == 2);
  CHECK(names_of(outer.named_parameters()) == std::vector<std::string>{"a.weight", "a.bias"});
  CHECK(outer.state_dict().size() == 4);  // PyTorch also lists both names
}

TEST_CASE("module: registration rejects bad and duplicate names", "[module]") {
  Open m;
  m.register_parameter("w", Tensor::zeros({2}));
  REQUIRE_THROWS_WITH(m.register_buffer("w", Tensor::zeros({2})),
                      Catch::Contains("module") && Catch::Contains("'w'"));
  REQUIRE_THROWS_WITH(m.register_parameter("a.b", Tensor::zeros({2})),
                      Catch::Contains("module") && Catch::Contains("'a.b'"));
  REQUIRE_THROWS_WITH(m.register_parameter("idx", Tensor::from_indices({1}, {1})),
                      Catch::Contains("register_parameter") && Catch::Contains("floating"));
  REQUIRE_THROWS_WITH(m.register_module("child", std::shared_ptr<nn::Linear>()),
                      Catch::Contains("register_module"));
}

TEST_CASE("module: StateDict keeps insertion order and rejects duplicates", "[module]") {
  nn::StateDict state;
  state.insert("b", Tensor::zeros({1}));
  state.insert("a", Tensor::zeros({1}));
  state.set("c", Tensor::zeros({1}));
  CHECK(state.keys() == std::vector<std::string>{"b", "a", "c"});
  REQUIRE_THROWS_WITH(state.insert("a", Tensor::zeros({1})), Catch::Contains("duplicate"));
  state.erase("b");
  CHECK(state.keys() == std::vector<std::string>{"a", "c"});
  CHECK(state.contains("c"));
  REQUIRE_THROWS_WITH(state.at("b"), Catch::Contains("'b'"));
}

TEST_CASE("module: to(cuda) moves in place and back", "[module][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Net net;
  std::vector<double> before = net.fc->weight().to_vector();
  Tensor handle = net.fc->weight();
  net.to(engine::Device::cuda());
  CHECK(handle.device().is_cuda());
  for (const auto& entry : net.state_dict()) {
    INFO(entry.first);
    bool counter = entry.second.dtype() == DType::I64;
    CHECK(entry.second.device().is_cuda() != counter);  // counters stay on the host
  }
  net.to(engine::Device::cpu());
  CHECK(handle.device().is_cpu());
  CHECK(handle.to_vector() == before);
}
