// Writes in place into what a backward reads (engine/autograd.h, storage versions): refused with
// an error naming the op and the saved tensor, before any gradient is stored; writes into what no
// backward reads stay allowed and give the right gradient.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/optim/sgd.h"
#include "tests/support/allclose.h"

using namespace engine;

namespace {

Tensor leaf(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape, DType::F64).set_requires_grad();
}

Tensor ramp(const Shape& shape, double scale = 0.1) {
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = scale * double(i % 7) - 0.25;
  return Tensor::from_vector(values, shape, DType::F64);
}

}  // namespace

TEST_CASE("autograd in place: a saved operand written after the forward is refused", "[autograd]") {
  // L = sum(x * y) saves x and y; y.fill_ afterwards would make dL/dx = y read the new values.
  Tensor x = leaf({1, 2}, {2});
  Tensor y = leaf({3, 4}, {2});
  Tensor loss = sum(x * y);
  const uint64_t before = y.version();
  {
    NoGradGuard no_grad;
    y.fill_(10.0);
  }
  REQUIRE(y.version() == before + 1);
  REQUIRE_THROWS_WITH(backward(loss), Catch::Contains("backward of 'mul'") &&
                                          Catch::Contains("its b, saved for the backward") &&
                                          Catch::Contains("clone()"));
  REQUIRE_FALSE(x.grad().defined());  // nothing was stored
  REQUIRE_FALSE(y.grad().defined());

  // The same computation recorded after the write differentiates normally.
  Tensor again = sum(x * y);
  backward(again);
  REQUIRE(x.grad().to_vector() == std::vector<double>{10, 10});
  REQUIRE(y.grad().to_vector() == std::vector<double>{1, 2});
}

TEST_CASE("autograd in place: writing what no backward reads is allowed and exact", "[autograd]") {
  // add saves nothing: dL/dx = dL/dy = 1 whatever x and y hold at backward time.
  Tensor x = leaf({1, 2}, {2});
  Tensor y = leaf({3, 4}, {2});
  Tensor loss = sum(x + y);
  {
    NoGradGuard no_grad;
    x.fill_(-5.0);
    y.copy_(Tensor::from_vector({7, 8}, {2}, DType::F64));
  }
  backward(loss);
  REQUIRE(x.grad().to_vector() == std::vector<double>{1, 1});
  REQUIRE(y.grad().to_vector() == std::vector<double>{1, 1});

  // A clone taken before the write is a different memory: the saved original stays valid.
  Tensor a = leaf({1, 2}, {2});
  Tensor b = leaf({3, 4}, {2});
  Tensor product = sum(a * b);
  Tensor b_copy = b.detach().clone();
  b_copy.fill_(0.0);
  backward(product);
  REQUIRE(a.grad().to_vector() == std::vector<double>{3, 4});
}

TEST_CASE("autograd in place: a strided input saved as a private copy keeps its gradient",
          "[autograd]") {
  // matmul saves a contiguous copy of a transposed operand, so writing the original afterwards
  // leaves the recorded forward intact: d sum(A^T B) / dB = A^T 1 (row sums of A) as at forward.
  Tensor a = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, DType::F64);  // A = [[1, 2], [3, 4]]
  Tensor b = leaf({1, 0, 0, 1}, {2, 2});
  Tensor loss = sum(matmul(a.transpose(0, 1), b));
  a.fill_(100.0);
  backward(loss);
  // (A^T)^T 1 = A 1 per column of B: [1 + 2, 3 + 4] down each column.
  REQUIRE(b.grad().to_vector() == std::vector<double>{3, 3, 7, 7});
}

TEST_CASE("autograd in place: another view of the saved memory counts as the same memory",
          "[autograd]") {
  Tensor weight = leaf({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor x = leaf({1, 1}, {1, 2});
  Tensor loss = sum(linear(x, weight.slice(0, 0, 2), Tensor()));  // saves rows 0-1
  {
    NoGradGuard no_grad;
    weight.slice(0, 2, 3).fill_(0.0);  // row 2: not read, but the same storage (as PyTorch)
  }
  REQUIRE_THROWS_WITH(backward(loss),
                      Catch::Contains("backward of 'linear'") && Catch::Contains("its weight"));
}

TEST_CASE("autograd in place: an optimizer step between forward and backward is refused",
          "[autograd]") {
  Tensor weight = leaf({0.5, -0.5, 0.25, 1.0}, {2, 2});
  Tensor x = leaf({1, 2}, {1, 2});
  Tensor loss = sum(linear(x, weight, Tensor()));
  backward(loss, Tensor(), /*retain_graph=*/true);
  const std::vector<double> first = x.grad().to_vector();
  optim::SgdOptions options;
  options.lr = 0.1;
  optim::Sgd sgd({weight}, options);
  sgd.step();
  REQUIRE_THROWS_WITH(backward(loss), Catch::Contains("backward of 'linear'") &&
                                          Catch::Contains("its weight") &&
                                          Catch::Contains("optimizer step"));
  REQUIRE(x.grad().to_vector() == first);  // the refused pass added nothing
}

TEST_CASE("autograd in place: every op that saves tensors checks each of them", "[autograd]") {
  // One case per (op, saved tensor): build the op on fresh tensors, write the saved one in place,
  // and require the backward to refuse, naming the op and the tensor.
  struct Case {
    std::string op, what;
    // Returns (a scalar loss through the op, the tensor to write after the forward).
    std::function<std::pair<Tensor, Tensor>()> build;
  };
  const std::vector<Case> cases = {
      {"div", "divisor",
       [] {
         Tensor a = ramp({3}).set_requires_grad(), b = ramp({3}, 0.2) + 2.0;
         return std::make_pair(sum(div(a, b)), b);
       }},
      {"div", "output",
       [] {
         Tensor a = ramp({3}), b = (ramp({3}, 0.2) + 2.0).detach().set_requires_grad();
         Tensor q = div(a, b);
         return std::make_pair(sum(q), q);
       }},
      {"matmul", "a",
       [] {
         Tensor a = ramp({2, 3}), b = ramp({3, 2}).set_requires_grad();
         return std::make_pair(sum(matmul(a, b)), a);
       }},
      {"linear", "input",
       [] {
         Tensor x = ramp({2, 3}), w = ramp({4, 3}).set_requires_grad();
         return std::make_pair(sum(linear(x, w, Tensor())), x);
       }},
      {"conv2d", "input",
       [] {
         Tensor x = ramp({1, 2, 4, 4}), w = ramp({3, 2, 3, 3}).set_requires_grad();
         return std::make_pair(sum(conv2d(x, w, Tensor())), x);
       }},
      {"conv2d", "weight",
       [] {
         Tensor x = ramp({1, 2, 4, 4}).set_requires_grad(), w = ramp({3, 2, 3, 3});
         return std::make_pair(sum(conv2d(x, w, Tensor())), w);
       }},
      {"conv2d_pool_relu", "input",
       [] {
         Tensor x = ramp({1, 2, 4, 4}), w = ramp({3, 2, 3, 3}).set_requires_grad();
         return std::make_pair(sum(conv2d_pool_relu(x, w, Tensor(), Conv2dOptions{})), x);
       }},
      {"conv2d_pool_relu", "weight",
       [] {
         Tensor x = ramp({1, 2, 4, 4}).set_requires_grad(), w = ramp({3, 2, 3, 3});
         return std::make_pair(sum(conv2d_pool_relu(x, w, Tensor(), Conv2dOptions{})), w);
       }},
      {"max_pool2d", "input",
       [] {
         Tensor x = ramp({1, 1, 4, 4}).set_requires_grad();
         return std::make_pair(sum(max_pool2d(x, Pool2dOptions{})), x);
       }},
      {"batch_norm", "input",
       [] {
         Tensor x = ramp({4, 2}).set_requires_grad();
         Tensor w = Tensor::ones({1, 2}, DType::F64), b = Tensor::zeros({1, 2}, DType::F64);
         Tensor rm = Tensor::zeros({1, 2}, DType::F64), rv = Tensor::ones({1, 2}, DType::F64);
         Tensor y = batch_norm(x, w, b, rm, rv, single_branch_route(4), true, 0.1, 1e-5);
         return std::make_pair(sum(y * ramp({4, 2}, 0.3)), x);
       }},
      {"l2_normalize", "input",
       [] {
         Tensor x = (ramp({2, 3}) + 1.0).detach().set_requires_grad();
         return std::make_pair(sum(l2_normalize(x) * ramp({2, 3}, 0.3)), x);
       }},
      {"pairwise_distance", "second operand",
       [] {
         Tensor a = ramp({2, 3}).set_requires_grad(), b = ramp({3, 3}, 0.2);
         return std::make_pair(sum(pairwise_distance(a, b, DistanceMetric::Euclidean)), b);
       }},
      {"logsumexp", "output",
       [] {
         Tensor x = ramp({2, 3}).set_requires_grad();
         Tensor out = logsumexp(x, 1);
         return std::make_pair(sum(out), out);
       }},
      {"softmax", "output",
       [] {
         Tensor x = ramp({2, 3}).set_requires_grad();
         Tensor p = softmax(x, 1);
         return std::make_pair(sum(p), p);  // (a mul here would save p too)
       }},
      {"cross_entropy", "labels",
       [] {
         Tensor logits = ramp({2, 3}).set_requires_grad();
         Tensor labels = Tensor::from_indices({0, 2}, {2});
         return std::make_pair(cross_entropy(logits, labels), labels);
       }},
      {"exp", "output",
       [] {
         Tensor x = ramp({3}).set_requires_grad();
         Tensor y = exp(x);
         return std::make_pair(sum(y), y);
       }},
      {"log", "input",
       [] {
         Tensor x = (ramp({3}) + 2.0).detach().set_requires_grad();
         return std::make_pair(sum(log(x)), x);
       }},
      {"index_select", "index",
       [] {
         Tensor x = ramp({3, 2}).set_requires_grad();
         Tensor index = Tensor::from_indices({2, 0}, {2});
         return std::make_pair(sum(index_select(x, index)), index);
       }},
  };
  for (const Case& c : cases) {
    INFO(c.op << ": " << c.what);
    std::pair<Tensor, Tensor> built = c.build();
    built.second.fill_(built.second.dtype() == DType::I64 ? 1.0 : 0.5);
    REQUIRE_THROWS_WITH(backward(built.first),
                        Catch::Contains("backward of '" + c.op + "'") &&
                            Catch::Contains("its " + c.what + ", saved for the backward"));
  }
}

TEST_CASE("autograd in place: a backward frees what it saved, version bookkeeping included",
          "[autograd]") {
  // y = x * w saves x and w; once the backward has run, the graph (still reachable from `loss`)
  // must no longer hold w's memory, as before the version check existed.
  Tensor x = leaf({1, 2}, {2});
  std::weak_ptr<Storage> w_memory;
  Tensor loss;
  {
    Tensor w = Tensor::from_vector({3, 4}, {2}, DType::F64);
    w_memory = w.impl()->storage;
    loss = sum(x * w);
  }
  REQUIRE_FALSE(w_memory.expired());  // the recorded mul keeps w for its backward
  backward(loss);
  CHECK(w_memory.expired());
  CHECK(x.grad().to_vector() == std::vector<double>{3, 4});
}
