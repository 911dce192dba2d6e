// Forward passes against independent compositions of engine ops on the same weights (the
// `dml embed` acceptance), batch-norm behaviour of whole models (eval, frozen, K-branch routes),
// and the input gradient attacks rely on.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/nn/nn.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "models/embed.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "tests/models/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using engine::DType;
using engine::Tensor;
namespace nn = engine::nn;

namespace {

std::shared_ptr<models::Model> build(const std::string& name, int64_t dim, int64_t k = 1,
                                     bool frozen = false, bool init = true) {
  return models_test::build_model(11, name, dim, k, frozen, init);
}

// Gives every BN of `model` non-trivial affine parameters and running statistics (fresh BNs
// have weight 1, bias 0, mean 0, var 1, which would hide a missing or misplaced BN).
void randomize_batch_norms(nn::Module& model, uint64_t seed) {
  engine::Generator gen(seed);
  engine::NoGradGuard no_grad;
  for (nn::BatchNorm* bn : nn::batch_norm_layers(model)) {
    const engine::Shape shape = bn->weight().shape();  // [K, C]
    const DType dtype = bn->weight().dtype();
    Tensor(bn->weight()).copy_(engine::uniform(shape, 0.5, 1.5, gen, dtype));
    Tensor(bn->bias()).copy_(engine::uniform(shape, -0.2, 0.2, gen, dtype));
    Tensor(bn->running_mean()).copy_(engine::uniform(shape, -0.2, 0.2, gen, dtype));
    Tensor(bn->running_var()).copy_(engine::uniform(shape, 0.5, 1.5, gen, dtype));
  }
}

// Eval-mode batch norm written from its formula with broadcasting ops (not engine::batch_norm):
// y = (x - mean) / sqrt(var + 1e-5) * weight + bias, per channel (dim 1).
Tensor reference_bn(const Tensor& x, const nn::StateDict& state, const std::string& prefix) {
  const int64_t c = x.size(1);
  engine::Shape shape = x.dim() == 4 ? engine::Shape{1, c, 1, 1} : engine::Shape{1, c};
  auto param = [&](const char* field) { return state.at(prefix + field).reshape(shape); };
  Tensor inv_std = engine::pow(param("running_var") + 1e-5, -0.5);
  return (x - param("running_mean")) * inv_std * param("weight") + param("bias");
}

engine::Conv2dOptions conv_options(int64_t stride, int64_t pad) {
  engine::Conv2dOptions o;
  o.stride_h = o.stride_w = stride;
  o.pad_h = o.pad_w = pad;
  return o;
}

engine::Pool2dOptions pool_options(int64_t kernel, int64_t stride, int64_t pad) {
  engine::Pool2dOptions o;
  o.kernel_h = o.kernel_w = kernel;
  o.stride_h = o.stride_w = stride;
  o.pad_h = o.pad_w = pad;
  return o;
}

// C2F2 (and C2F2-BN when bn) layer by layer, from the table in docs/architecture.md.
Tensor reference_c2f2(const Tensor& x, const nn::StateDict& s, bool bn) {
  const int64_t n = x.size(0);
  Tensor h = engine::conv2d(x, s.at("conv1.weight"), s.at("conv1.bias"), conv_options(1, 2));
  if (bn) h = reference_bn(h, s, "bn1.");
  h = engine::max_pool2d(engine::relu(h), pool_options(2, 2, 0));  // [N, 32, 14, 14]
  h = engine::conv2d(h, s.at("conv2.weight"), s.at("conv2.bias"), conv_options(1, 2));
  if (bn) h = reference_bn(h, s, "bn2.");
  h = engine::max_pool2d(engine::relu(h), pool_options(2, 2, 0));  // [N, 64, 7, 7]
  h = h.reshape({n, 64 * 7 * 7});                                  // (C, H, W) order
  h = engine::linear(h, s.at("fc1.weight"), s.at("fc1.bias"));
  if (bn) h = reference_bn(h, s, "bn3.");
  return engine::linear(engine::relu(h), s.at("fc2.weight"), s.at("fc2.bias"));
}

// A torchvision ResNet from its definition: normalize, stem, stages of blocks (a block has a
// shortcut conv exactly when the state holds <block>.downsample.0.weight), global mean, fc.
Tensor reference_resnet(const Tensor& x, const nn::StateDict& s, bool bottleneck,
                        const std::vector<int64_t>& blocks) {
  Tensor mean = Tensor::from_vector({0.485, 0.456, 0.406}, {1, 3, 1, 1}, x.dtype());
  Tensor stddev = Tensor::from_vector({0.229, 0.224, 0.225}, {1, 3, 1, 1}, x.dtype());
  Tensor h = (x - mean) / stddev;
  h = engine::conv2d(h, s.at("conv1.weight"), Tensor(), conv_options(2, 3));
  h = engine::relu(reference_bn(h, s, "bn1."));
  h = engine::max_pool2d(h, pool_options(3, 2, 1));
  for (int64_t stage = 0; stage < 4; ++stage) {
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      Tensor out;
      if (bottleneck) {  // stride on the 3x3 conv (torchvision V1.5)
        out = engine::conv2d(h, s.at(p + "conv1.weight"), Tensor(), conv_options(1, 0));
        out = engine::relu(reference_bn(out, s, p + "bn1."));
        out = engine::conv2d(out, s.at(p + "conv2.weight"), Tensor(), conv_options(stride, 1));
        out = engine::relu(reference_bn(out, s, p + "bn2."));
        out = engine::conv2d(out, s.at(p + "conv3.weight"), Tensor(), conv_options(1, 0));
        out = reference_bn(out, s, p + "bn3.");
      } else {
        out = engine::conv2d(h, s.at(p + "conv1.weight"), Tensor(), conv_options(stride, 1));
        out = engine::relu(reference_bn(out, s, p + "bn1."));
        out = engine::conv2d(out, s.at(p + "conv2.weight"), Tensor(), conv_options(1, 1));
        out = reference_bn(out, s, p + "bn2.");
      }
      Tensor shortcut = h;
      if (s.contains(p + "downsample.0.weight")) {
        shortcut =
            engine::conv2d(h, s.at(p + "downsample.0.weight"), Tensor(), conv_options(stride, 0));
        shortcut = reference_bn(shortcut, s, p + "downsample.1.");
      }
      h = engine::relu(out + shortcut);
    }
  }
  h = engine::mean(h, {2, 3});  // global average pool -> [N, C]
  return engine::linear(h, s.at("fc.weight"), s.at("fc.bias"));
}

}  // namespace

TEST_CASE("c2f2: embed equals conv/relu/pool/linear composed by hand", "[models][forward]") {
  auto model = build("c2f2", 32);
  engine::Generator gen(21);
  Tensor x = engine::uniform({3, 1, 28, 28}, 0.0, 1.0, gen);
  models::EmbedOptions options;
  options.batch_size = 2;  // two batches, as dml embed runs them
  Tensor got = models::embed(*model, x, options);
  Tensor expected;
  {
    engine::NoGradGuard no_grad;
    expected = reference_c2f2(x, model->state_dict(), false);
  }
  REQUIRE(got.shape() == engine::Shape{3, 32});
  // Same ops, same order: equal up to f32 summation-order noise from the batch split.
  test::require_close(got, expected, 1e-5, 1e-5, "c2f2 embeddings");
}

TEST_CASE("c2f2-bn: eval forward equals the composition with BN from its formula",
          "[models][forward]") {
  auto model = build("c2f2-bn", 16);
  model->to(DType::F64);
  randomize_batch_norms(*model, 5);
  engine::Generator gen(22);
  Tensor x = engine::uniform({2, 1, 28, 28}, 0.0, 1.0, gen, DType::F64);
  model->eval();
  engine::NoGradGuard no_grad;
  test::require_close(model->forward(x), reference_c2f2(x, model->state_dict(), true), 1e-10, 1e-10,
                      "c2f2-bn eval");
}

TEST_CASE("resnet18: forward on 1x3x64x64 equals the whole net composed from ops",
          "[models][forward]") {
  auto model = build("resnet18", 24, 1, false, /*init=*/false);
  model->to(DType::F64);
  randomize_batch_norms(*model, 6);
  engine::Generator gen(23);
  Tensor x = engine::uniform({1, 3, 64, 64}, 0.0, 1.0, gen, DType::F64);
  model->eval();
  engine::NoGradGuard no_grad;
  Tensor got = model->forward(x);
  REQUIRE(got.shape() == engine::Shape{1, 24});
  test::require_close(got, reference_resnet(x, model->state_dict(), false, {2, 2, 2, 2}), 1e-10,
                      1e-9, "resnet18");
}

TEST_CASE("resnet50: forward on 1x3x32x32 equals the whole net composed from ops",
          "[models][forward]") {
  auto model = build("resnet50", 8, 1, false, /*init=*/false);
  model->to(DType::F64);
  randomize_batch_norms(*model, 7);
  engine::Generator gen(24);
  Tensor x = engine::uniform({1, 3, 32, 32}, 0.0, 1.0, gen, DType::F64);
  model->eval();
  engine::NoGradGuard no_grad;
  test::require_close(model->forward(x),
                      reference_resnet(x, model->state_dict(), true, {3, 4, 6, 3}), 1e-10, 1e-9,
                      "resnet50");
}

TEST_CASE("resnet normalize: hand values and gradient", "[models][forward]") {
  // Pixel 0.485 in channel 0 maps to 0; 1.0 in channel 2 to (1 - 0.406) / 0.225 = 2.64.
  Tensor x = Tensor::from_vector({0.485, 0.456, 1.0}, {1, 3, 1, 1}, DType::F64);
  test::require_close(models::ResNet::normalize(x), {0.0, 0.0, 0.594 / 0.225}, 1e-12, 0,
                      "normalize");
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) { return models::ResNet::normalize(in[0]); },
      {test::random_leaf({2, 3, 2, 2}, 31, 0.0, 1.0)});
}

TEST_CASE("resnet blocks grad: BasicBlock and Bottleneck with downsample (eval BN)",
          "[models][forward]") {
  models::ResNetOptions options;
  engine::Generator gen(33);
  // Strided blocks whose width changes, so the downsample shortcut is on the path too.
  models::BasicBlock basic(3, 4, 2, options, gen);
  models::Bottleneck bottleneck(4, 2, 2, options, gen);  // 4 -> 8 channels
  for (nn::Module* block :
       {static_cast<nn::Module*>(&basic), static_cast<nn::Module*>(&bottleneck)}) {
    block->to(DType::F64);
    randomize_batch_norms(*block, 12);
    block->eval();
  }
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return basic.forward(in[0]); },
                          {test::random_leaf({2, 3, 5, 5}, 34)});
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return bottleneck.forward(in[0]); },
                          {test::random_leaf({1, 4, 5, 5}, 35)});
}

TEST_CASE("resnet18 grad: input gradient matches a directional finite difference",
          "[models][forward]") {
  // For L(x) = sum(f(x) * w): <dL/dx, v> ~ (L(x + h v) - L(x - h v)) / 2h, two extra forwards
  // instead of one per pixel (the layers themselves are gradient-checked element by element).
  auto model = build("resnet18", 4, 1, false, false);
  model->to(DType::F64);
  randomize_batch_norms(*model, 13);
  model->eval();
  engine::Generator gen(36);
  Tensor x = engine::uniform({1, 3, 16, 16}, 0.2, 0.8, gen, DType::F64);
  x.set_requires_grad(true);
  Tensor v = engine::uniform({1, 3, 16, 16}, -1.0, 1.0, gen, DType::F64);
  Tensor w = engine::uniform({1, 4}, 0.5, 1.5, gen, DType::F64);
  Tensor dx = engine::grad({engine::sum(model->forward(x) * w)}, {x})[0];
  const double analytic = engine::sum(dx * v).item();
  engine::NoGradGuard no_grad;
  const double h = 1e-6;
  auto loss = [&](const Tensor& input) { return engine::sum(model->forward(input) * w).item(); };
  const double numeric = (loss(x.detach() + v * h) - loss(x.detach() - v * h)) / (2 * h);
  CHECK(analytic == Approx(numeric).epsilon(1e-6).margin(1e-8));
}

TEST_CASE("frozen BN: running statistics are used and kept while training", "[models][forward]") {
  auto model = build("c2f2-bn", 8, 1, /*frozen=*/true);
  model->to(DType::F64);
  randomize_batch_norms(*model, 9);
  for (nn::BatchNorm* bn : nn::batch_norm_layers(*model)) CHECK(bn->frozen());
  Tensor mean_before = model->state_dict().at("bn2.running_mean").clone();
  engine::Generator gen(25);
  Tensor x = engine::uniform({4, 1, 28, 28}, 0.0, 1.0, gen, DType::F64);
  model->train();
  Tensor y = model->forward(x);
  // Training with frozen BN = the eval-mode network.
  {
    engine::NoGradGuard no_grad;
    test::require_close(y, reference_c2f2(x, model->state_dict(), true), 1e-10, 1e-10, "frozen");
  }
  test::require_close(model->state_dict().at("bn2.running_mean"), mean_before, 0, 0, "stats");
  CHECK(model->state_dict().at("bn2.num_batches_tracked").item() == 0);
  // BN affine parameters still learn.
  engine::backward(engine::sum(y));
  for (nn::BatchNorm* bn : nn::batch_norm_layers(*model)) CHECK(bn->weight().grad().defined());
  // The registry's frozen_bn reaches every BN of a ResNet.
  auto resnet = build("resnet18", 4, 1, true, false);
  auto layers = nn::batch_norm_layers(*resnet);
  CHECK(layers.size() == 20);
  for (nn::BatchNorm* bn : layers) CHECK(bn->frozen());
}

TEST_CASE("K = 2 routes: each row range goes through its own branch", "[models][forward]") {
  // The K = 2 model must act on rows 0-1 like a K = 1 model holding branch 0, and on rows 2-3
  // like a K = 1 model holding branch 1, in training (batch statistics) and eval.
  auto two = build("c2f2-bn", 6, 2);
  two->to(DType::F64);
  randomize_batch_norms(*two, 10);  // branches differ
  nn::StateDict state = two->state_dict();
  auto branch = [&](int64_t k) {
    auto single = build("c2f2-bn", 6, 1);
    single->to(DType::F64);
    nn::StateDict own = single->state_dict();
    for (const auto& entry : own) {
      std::string from = entry.first;
      size_t dot = from.find('.');
      if (k > 0 && from.rfind("bn", 0) == 0)
        from.insert(dot + 1, "aux_bn." + std::to_string(k - 1) + ".");
      Tensor(entry.second).copy_(state.at(from));
    }
    return single;
  };
  auto zero = branch(0), one = branch(1);
  engine::Generator gen(26);
  Tensor x = engine::uniform({4, 1, 28, 28}, 0.0, 1.0, gen, DType::F64);

  nn::set_batch_norm_routes(*two, {{0, 2, 0}, {2, 4, 1}});
  two->train();
  zero->train();
  one->train();
  engine::NoGradGuard no_grad;
  Tensor y = two->forward(x);
  test::require_close(y.slice(0, 0, 2), zero->forward(x.slice(0, 0, 2)), 1e-10, 1e-10, "rows 0-1");
  test::require_close(y.slice(0, 2, 4), one->forward(x.slice(0, 2, 4)), 1e-10, 1e-10, "rows 2-3");
  // Each branch's running statistics moved as its twin's did.
  nn::StateDict after = two->state_dict();
  test::require_close(after.at("bn3.running_mean"), zero->state_dict().at("bn3.running_mean"),
                      1e-12, 1e-12, "branch 0 stats");
  test::require_close(after.at("bn3.aux_bn.0.running_var"), one->state_dict().at("bn3.running_var"),
                      1e-12, 1e-12, "branch 1 stats");

  // Eval: branch 0 by default, branch 1 when selected.
  two->eval();
  zero->eval();
  one->eval();
  nn::set_batch_norm_routes(*two, {});
  test::require_close(two->forward(x), zero->forward(x), 1e-10, 1e-10, "eval branch 0");
  nn::set_batch_norm_eval_branch(*two, 1);
  test::require_close(two->forward(x), one->forward(x), 1e-10, 1e-10, "eval branch 1");
}
