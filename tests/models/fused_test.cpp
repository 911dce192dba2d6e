// C2F2 with ENGINE_FUSED's fused blocks (engine::conv2d_pool_relu) against its unfused forward:
// the embedding and every gradient of one forward + backward -- the input's (an attack pass) and
// the parameters' (a training step).
//
// CUDA: the fused kernels keep the unfused ops' arithmetic, so the bits are the same. CPU: the
// fused op runs the plain-loop conv, the unfused one im2col + GEMM, so the f32 sums round in
// another order (conv2's 800-term sums, ~sqrt(800) eps ~ 2e-6 relative, compounded through fc1's
// 3136 terms and fc2): 1e-4 relative to each tensor's largest entry covers that by ~10x and is
// far below any difference that would mean a wrong routing (a gradient sent to another cell).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/models/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/backend_scope.h"
#include "tests/support/cuda_guard.h"

using engine::Device;
using engine::Tensor;

namespace {

// The embedding of `images` followed by the gradients of sum(embedding * r) with respect to the
// images and every parameter, with the fused kernels on or off.
std::vector<Tensor> forward_backward(models::Model& model, const Tensor& images, bool fused,
                                     Device device) {
  const test::FusedKernelsScope scope(fused);
  Tensor x = images.to(device).detach();
  x.set_requires_grad(true);
  const Tensor embedding = model.forward(x);
  engine::Generator gen(7);
  const Tensor r = engine::uniform(embedding.shape(), -1.0, 1.0, gen).to(device);
  std::vector<Tensor> inputs = {x};
  for (const Tensor& p : model.parameters()) inputs.push_back(p);
  std::vector<Tensor> results = {embedding.detach()};
  for (const Tensor& g : engine::grad({engine::sum(embedding * r)}, inputs)) results.push_back(g);
  return results;
}

Tensor c2f2_images(int64_t n) {
  engine::Generator gen(5);
  return engine::uniform({n, 1, 28, 28}, 0.0, 1.0, gen);
}

}  // namespace

TEST_CASE("models: c2f2 forward and backward agree with fused kernels on the cpu",
          "[models][fused]") {
  auto model = models_test::build_model(41, "c2f2", 16);
  const Tensor images = c2f2_images(2);
  const std::vector<Tensor> plain = forward_backward(*model, images, false, Device::cpu());
  const std::vector<Tensor> fused = forward_backward(*model, images, true, Device::cpu());
  REQUIRE(plain.size() == 2 + 8);  // embedding, images, 4 weights and 4 biases
  for (size_t i = 0; i < plain.size(); ++i) {
    const std::vector<double> ref = plain[i].to_vector();
    double largest = 0.0;
    for (double v : ref) largest = std::max(largest, std::abs(v));
    REQUIRE(largest > 0.0);
    test::require_close(fused[i], plain[i], 1e-4 * largest, 0.0, "result " + std::to_string(i));
  }
}

TEST_CASE("models cuda: c2f2 forward and backward give the same bits with fused kernels",
          "[models][fused][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const test::BackendScope ours(engine::ConvBackend::Ours);
  auto model = models_test::build_model(41, "c2f2", 16);
  model->to(Device::cuda());
  const Tensor images = c2f2_images(3);
  const std::vector<Tensor> plain = forward_backward(*model, images, false, Device::cuda());
  const std::vector<Tensor> fused = forward_backward(*model, images, true, Device::cuda());
  REQUIRE(plain.size() == 2 + 8);
  for (size_t i = 0; i < plain.size(); ++i) {
    REQUIRE(fused[i].device().is_cuda());
    test::require_close(fused[i], plain[i], 0.0, 0.0, "result " + std::to_string(i));
  }
}

TEST_CASE("models: ENGINE_FUSED switches c2f2's blocks, c2f2-bn keeps its own", "[models][fused]") {
  // The switch is read by C2F2::forward: with it on, plain C2F2 records the fused ops' nodes
  // (two conv2d_pool_relu, one linear_relu); the unfused path and C2F2-BN record none.
  auto fused_nodes = [](const std::string& name, bool fused) {
    auto model = models_test::build_model(41, name, 8);
    const test::FusedKernelsScope scope(fused);
    Tensor x = c2f2_images(2);
    x.set_requires_grad(true);
    engine::GradTrace trace;
    engine::grad({engine::sum(model->forward(x))}, {x});
    int nodes = 0;
    for (const std::string& entry : trace.computed()) {
      nodes += entry == "conv2d_pool_relu:0" || entry == "linear_relu:0";
    }
    return nodes;
  };
  REQUIRE(fused_nodes("c2f2", true) == 3);
  REQUIRE(fused_nodes("c2f2", false) == 0);
  REQUIRE(fused_nodes("c2f2-bn", true) == 0);
}
