// The tape: accumulation, graph release, no-grad mode, and grad() computing only what the listed
// inputs need (the property attacks rely on).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/grad_ready.h"
#include "engine/ops.h"
#include "tests/support/allclose.h"
#include "tests/support/gradcheck.h"

using namespace engine;

TEST_CASE("autograd: backward accumulates into leaf grads (hand-computed)", "[autograd]") {
  // L = sum(x * x * y) with x = [1, 2], y = [3, 4]: dL/dx = 2xy = [6, 16], dL/dy = x^2 = [1, 4].
  Tensor x = Tensor::from_vector({1, 2}, {2}, DType::F64).set_requires_grad();
  Tensor y = Tensor::from_vector({3, 4}, {2}, DType::F64).set_requires_grad();
  Tensor loss = sum(x * x * y);
  REQUIRE(loss.item() == 1 * 1 * 3 + 2 * 2 * 4);
  REQUIRE_FALSE(loss.is_leaf());
  REQUIRE(loss.grad_fn()->op == "sum");
  backward(loss, Tensor(), /*retain_graph=*/true);
  REQUIRE(x.grad().to_vector() == std::vector<double>{6, 16});
  REQUIRE(y.grad().to_vector() == std::vector<double>{1, 4});
  backward(loss);  // a second pass adds up
  REQUIRE(x.grad().to_vector() == std::vector<double>{12, 32});
  x.reset_grad();
  REQUIRE_FALSE(x.grad().defined());
}

TEST_CASE("autograd: a gradient of another dtype or device is refused, not stored", "[autograd]") {
  Tensor x = Tensor::from_vector({1, 2}, {2}).set_requires_grad();  // f32
  Tensor y = x * x;
  REQUIRE_THROWS_WITH(backward(y, Tensor::ones({2}, DType::F64)),
                      Catch::Contains("gradient for output 0 is f64"));
  REQUIRE_FALSE(x.grad().defined());
  REQUIRE_THROWS_WITH(x.set_grad(Tensor::ones({2}, DType::F64)), Catch::Contains("set_grad"));
  backward(y, Tensor::ones({2}));
  REQUIRE(x.grad().to_vector() == std::vector<double>{2, 4});
}

TEST_CASE("autograd: backward through a released graph is a clear error", "[autograd]") {
  Tensor x = Tensor::from_vector({1, 2}, {2}, DType::F64).set_requires_grad();
  Tensor loss = sum(exp(x));
  backward(loss);
  REQUIRE_THROWS_WITH(backward(loss),
                      Catch::Contains("already been freed") && Catch::Contains("retain_graph"));
}

TEST_CASE("autograd: shared subexpressions sum their gradients", "[autograd]") {
  // y = x * 3; L = sum(y * y + y): dL/dx = (2y + 1) * 3 = [21, 39] at x = [1, 2].
  Tensor x = Tensor::from_vector({1, 2}, {2}, DType::F64).set_requires_grad();
  Tensor y = x * 3.0;
  Tensor loss = sum(y * y + y);
  std::vector<Tensor> g = grad({loss}, {x, y});
  REQUIRE(g[0].to_vector() == std::vector<double>{21, 39});
  REQUIRE(g[1].to_vector() == std::vector<double>{7, 13});  // grad w.r.t. a non-leaf: 2y + 1
  REQUIRE_FALSE(x.grad().defined());                        // grad() touches no .grad
}

TEST_CASE("autograd: NoGradGuard and detach record nothing", "[autograd]") {
  Tensor x = Tensor::from_vector({1, 2}, {2}, DType::F64).set_requires_grad();
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0;
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.is_leaf());
  }
  Tensor z = x.detach() * 2.0;
  REQUIRE_FALSE(z.requires_grad());
  Tensor loss = sum(x * x.detach());  // gradient only through the first factor: d/dx = x
  backward(loss);
  REQUIRE(x.grad().to_vector() == std::vector<double>{1, 2});
  REQUIRE_THROWS_WITH(backward(sum(z)), Catch::Contains("does not require grad"));
}

TEST_CASE("autograd: grad() of an input the output does not depend on is zero", "[autograd]") {
  Tensor x = Tensor::from_vector({1, 2}, {2}, DType::F64).set_requires_grad();
  Tensor unused = Tensor::from_vector({5}, {1}, DType::F64).set_requires_grad();
  std::vector<Tensor> g = grad({sum(x)}, {x, unused});
  REQUIRE(g[0].to_vector() == std::vector<double>{1, 1});
  REQUIRE(g[1].to_vector() == std::vector<double>{0});
  REQUIRE_THROWS_WITH(grad({sum(x)}, {Tensor::zeros({2})}),
                      Catch::Contains("does not require grad"));
  REQUIRE_THROWS_WITH(grad({x * 2.0}, {x}), Catch::Contains("not a scalar"));
}

namespace {

// A small conv net written with ops: conv(3x3, pad 1) -> relu -> maxpool 2 -> linear -> L = sum
// y^2.
struct TinyConvNet {
  Tensor w1, b1, w2, b2;

  explicit TinyConvNet(DType dtype) {
    Generator gen(17);
    w1 = uniform({4, 2, 3, 3}, -0.4, 0.4, gen, dtype).set_requires_grad();
    b1 = uniform({4}, -0.1, 0.1, gen, dtype).set_requires_grad();
    w2 = uniform({3, 4 * 3 * 3}, -0.3, 0.3, gen, dtype).set_requires_grad();
    b2 = uniform({3}, -0.1, 0.1, gen, dtype).set_requires_grad();
  }
  std::vector<Tensor> parameters() const { return {w1, b1, w2, b2}; }

  Tensor loss(const Tensor& x) const {
    Conv2dOptions conv;
    conv.pad_h = conv.pad_w = 1;
    Tensor h = relu(conv2d(x, w1, b1, conv));
    h = max_pool2d(h, Pool2dOptions{});
    Tensor y = linear(h.reshape({x.size(0), -1}), w2, b2);
    return sum(y * y);
  }
};

}  // namespace

TEST_CASE("autograd grad: input gradient of a conv net equals finite differences",
          "[autograd][grad]") {
  TinyConvNet net(DType::F64);
  Tensor x = test::random_leaf({2, 2, 6, 6}, 5, 0.0, 1.0);
  test::require_gradcheck([&](const std::vector<Tensor>& in) { return net.loss(in[0]); }, {x});
}

TEST_CASE("autograd grad: asking for the input gradient computes no parameter gradient",
          "[autograd][grad]") {
  TinyConvNet net(DType::F32);
  Generator gen(3);
  Tensor x = uniform({8, 2, 6, 6}, 0.0, 1.0, gen).set_requires_grad();
  int64_t param_bytes = 0;
  for (const Tensor& p : net.parameters()) param_bytes += p.numel() * 4;

  // Input only.
  Tensor loss = net.loss(x);
  int64_t before = allocator_stats(Device::cpu()).bytes_requested;
  std::vector<Tensor> gx;
  GradTrace input_trace;
  gx = grad({loss}, {x});
  int64_t input_only_bytes = allocator_stats(Device::cpu()).bytes_requested - before;
  REQUIRE(gx[0].shape() == x.shape());
  for (const Tensor& p : net.parameters()) REQUIRE_FALSE(p.grad().defined());
  REQUIRE_FALSE(x.grad().defined());
  REQUIRE(input_trace.contains("conv2d:0"));        // dgrad ran
  REQUIRE_FALSE(input_trace.contains("conv2d:1"));  // wgrad never ran
  REQUIRE_FALSE(input_trace.contains("conv2d:2"));  // nor the bias gradient
  REQUIRE_FALSE(input_trace.contains("linear:1"));
  REQUIRE_FALSE(input_trace.contains("linear:2"));

  // Everything, for comparison: same graph, same input gradient, plus all weight gradients.
  Tensor loss2 = net.loss(x);
  std::vector<Tensor> wanted = net.parameters();
  wanted.insert(wanted.begin(), x);
  before = allocator_stats(Device::cpu()).bytes_requested;
  std::vector<Tensor> all = grad({loss2}, wanted);
  int64_t all_bytes = allocator_stats(Device::cpu()).bytes_requested - before;
  test::require_close(gx[0], all[0], 0, 0, "input gradient");
  // The full pass allocates at least one buffer per parameter gradient more than the input-only
  // pass: the input-only pass allocated none of them.
  REQUIRE(all_bytes - input_only_bytes >= param_bytes);
  for (const Tensor& p : net.parameters()) REQUIRE_FALSE(p.grad().defined());
}

TEST_CASE("autograd: requires_grad on images lets backward reach them", "[autograd]") {
  Tensor image = Tensor::full({1, 1, 2, 2}, 0.5).set_requires_grad();
  Tensor w = Tensor::ones({1, 1, 1, 1});  // weights without requires_grad
  backward(sum(conv2d(image, w, Tensor())));
  REQUIRE(image.grad().to_vector() == std::vector<double>{1, 1, 1, 1});
  REQUIRE_FALSE(w.grad().defined());
}

TEST_CASE("autograd: the gradient-ready hook fires once per leaf, in backward order, when final",
          "[autograd]") {
  // y = w3 * (w2 * (w1 * x)) + w1 with x = 1, w1 = 2, w2 = 3, w3 = 5. The walk runs the add
  // (a first gradient to w1, not final), then w3's mul (w3 final: w2 w1 x = 6), then w2's mul
  // (w2 final: w3 w1 x = 10), then w1's mul (w1 final: w3 w2 x + 1 = 16).
  Tensor x = Tensor::from_vector({1}, {1}, DType::F64);
  Tensor w1 = Tensor::from_vector({2}, {1}, DType::F64).set_requires_grad();
  Tensor w2 = Tensor::from_vector({3}, {1}, DType::F64).set_requires_grad();
  Tensor w3 = Tensor::from_vector({5}, {1}, DType::F64).set_requires_grad();
  Tensor y = sum(w3 * (w2 * (w1 * x)) + w1);
  std::vector<std::string> ready;
  std::vector<double> grad_when_ready;
  {
    GradReadyHook hook([&](const Tensor& leaf) {
      const std::string name = leaf.impl() == w1.impl()   ? "w1"
                               : leaf.impl() == w2.impl() ? "w2"
                               : leaf.impl() == w3.impl() ? "w3"
                                                          : "?";
      ready.push_back(name);
      grad_when_ready.push_back(leaf.grad().item());
    });
    backward(y, Tensor(), /*retain_graph=*/true);
  }
  REQUIRE(ready == std::vector<std::string>{"w3", "w2", "w1"});
  REQUIRE(grad_when_ready == std::vector<double>{6, 10, 16});  // final when the hook is told
  REQUIRE(w1.grad().item() == 16);
  // grad() touches no .grad and calls no hook; without a hook backward() is as before.
  ready.clear();
  {
    GradReadyHook hook([&](const Tensor&) { ready.push_back("called"); });
    const std::vector<Tensor> g = grad({y}, {w2}, {}, /*retain_graph=*/true);
    REQUIRE(g[0].item() == 10);
  }
  REQUIRE(ready.empty());
  backward(y);
  REQUIRE(w1.grad().item() == 32);  // accumulated: 16 + 16
}
