// Tensor basics: factories, geometry, copies, device moves, dtype conversion, allocator.
#include <catch2/catch.hpp>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/gradcheck.h"

using namespace engine;

TEST_CASE("tensor: factories and metadata", "[tensor]") {
  Tensor t = Tensor::full({2, 3}, 1.5);
  REQUIRE(t.defined());
  REQUIRE(t.shape() == Shape{2, 3});
  REQUIRE(t.strides() == Shape{3, 1});
  REQUIRE(t.numel() == 6);
  REQUIRE(t.dim() == 2);
  REQUIRE(t.size(-1) == 3);
  REQUIRE(t.dtype() == DType::F32);
  REQUIRE(t.device().is_cpu());
  REQUIRE(t.is_contiguous());
  REQUIRE(t.to_vector() == std::vector<double>(6, 1.5));
  REQUIRE(t.str() == "f32[2, 3] on cpu");
  REQUIRE(Tensor::zeros({0, 4}).numel() == 0);
  REQUIRE(Tensor::scalar(2.0, DType::F64).item() == 2.0);
  REQUIRE(Tensor::arange(4).to_indices() == std::vector<int64_t>{0, 1, 2, 3});
  REQUIRE_FALSE(Tensor().defined());
  REQUIRE_THROWS_WITH(Tensor().shape(), Catch::Contains("undefined tensor"));
  REQUIRE_THROWS_WITH(Tensor::zeros({2, -1}), Catch::Contains("negative dimension"));
  // Byte counts past int64 are refused before anything is allocated or written: 2^62 f64
  // elements would wrap to 0 bytes, 2^32 x 2^32 overflows the element count itself.
  REQUIRE_THROWS_WITH(Tensor::zeros({int64_t(1) << 62}, DType::F64),
                      Catch::Contains("more elements than memory can address"));
  REQUIRE_THROWS_WITH(Tensor::empty({int64_t(1) << 32, int64_t(1) << 32}),
                      Catch::Contains("more elements"));
  REQUIRE(Tensor::empty({0, int64_t(1) << 62}).numel() == 0);
  REQUIRE_THROWS_WITH(Tensor::from_vector({1, 2, 3}, {2, 2}), Catch::Contains("do not fill"));
  REQUIRE_THROWS_WITH(t.data<double>(), Catch::Contains("dtype f32"));
  REQUIRE_THROWS_WITH(t.item(), Catch::Contains("one-element"));
}

TEST_CASE("tensor: a strided view is gathered by contiguous() and written by copy_", "[tensor]") {
  Tensor base = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3}, DType::F64);
  // The transpose as a raw view: shape [3, 2], strides [1, 3].
  Tensor transposed = make_view(base, {3, 2}, {1, 3}, 0);
  REQUIRE_FALSE(transposed.is_contiguous());
  REQUIRE(transposed.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor packed = transposed.contiguous();
  REQUIRE(packed.is_contiguous());
  REQUIRE(packed.strides() == Shape{2, 1});
  // Column 1 of base: shape [2], stride 3, offset 1. Writing through it changes base.
  Tensor column = make_view(base, {2}, {3}, 1);
  column.copy_(Tensor::from_vector({10, 40}, {2}, DType::F64));
  REQUIRE(base.to_vector() == std::vector<double>{0, 10, 2, 3, 40, 5});
  column.fill_(-1);
  REQUIRE(base.to_vector() == std::vector<double>{0, -1, 2, 3, -1, 5});
  // Broadcast view (stride 0) reads fine but cannot be written.
  Tensor row = make_view(base, {3, 3}, {0, 1}, 0);
  REQUIRE(row.contiguous().to_vector() == std::vector<double>{0, -1, 2, 0, -1, 2, 0, -1, 2});
  REQUIRE_THROWS_WITH(row.copy_(Tensor::zeros({3, 3}, DType::F64)), Catch::Contains("expanded"));
  REQUIRE_THROWS_WITH(column.copy_(Tensor::zeros({3}, DType::F64)),
                      Catch::Contains("copy_: source shape [3]"));
  // A source in the destination's own storage: x^T <- x is the transpose, not a half-overwritten
  // read ([1, 2, 2, 4] if the strided copy read cells it had already written).
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2}, DType::F64);
  make_view(x, {2, 2}, {1, 2}, 0).copy_(x);
  REQUIRE(x.to_vector() == std::vector<double>{1, 3, 2, 4});
}

TEST_CASE("tensor: clone, detach and dtype conversion", "[tensor]") {
  Tensor a = Tensor::from_vector({1.5, -2.25, 3}, {3});
  Tensor c = a.clone();
  Tensor d = a.detach();
  a.fill_(0);
  REQUIRE(c.to_vector() == std::vector<double>{1.5, -2.25, 3});  // clone owns its memory
  REQUIRE(d.to_vector() == std::vector<double>{0, 0, 0});        // detach shares it
  Tensor f64 = c.to(DType::F64);
  REQUIRE(f64.dtype() == DType::F64);
  REQUIRE(f64.to_vector() == c.to_vector());
  Tensor idx = Tensor::from_vector({2.9, -1.2}, {2}, DType::F64).to(DType::I64);
  REQUIRE(idx.to_indices() == std::vector<int64_t>{2, -1});  // truncation, like static_cast
}

TEST_CASE("tensor: requires_grad rules", "[tensor][autograd]") {
  Tensor x = Tensor::zeros({2});
  REQUIRE_FALSE(x.requires_grad());
  x.set_requires_grad(true);
  REQUIRE(x.requires_grad());
  REQUIRE(x.is_leaf());
  REQUIRE_FALSE(x.grad().defined());
  REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::I64).set_requires_grad(true),
                      Catch::Contains("only f32/f64"));
  REQUIRE_THROWS_WITH(x.set_grad(Tensor::zeros({3})), Catch::Contains("gradient shape [3]"));
}

TEST_CASE("device: parsing and discovery", "[device]") {
  REQUIRE(parse_device("cpu") == Device::cpu());
  REQUIRE(parse_device("cuda") == Device::cuda(0));
  REQUIRE(parse_device("cuda:1") == Device::cuda(1));
  // Parsed, but nothing is allocated there: everything runs on the current device, cuda:0.
  REQUIRE_THROWS_WITH(Tensor::empty({2}, DType::F32, Device::cuda(1)),
                      Catch::Contains("cuda:1: the engine runs on one GPU, cuda:0"));
  REQUIRE_THROWS_WITH(parse_device("gpu"), Catch::Contains("invalid device 'gpu'"));
  REQUIRE_THROWS_WITH(parse_device("cuda:x"), Catch::Contains("invalid device"));
  // An index past int: a clear error, not std::out_of_range from stoi.
  REQUIRE_THROWS_WITH(parse_device("cuda:99999999999"), Catch::Contains("invalid device"));
  REQUIRE(cuda_device_count() >= 0);
  if (cuda_device_count() == 0) {
    REQUIRE(default_device() == Device::cpu());
    REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::F32, Device::cuda()),
                        Catch::Contains("no CUDA device"));
  }
}

TEST_CASE("allocator: host statistics track allocations", "[allocator]") {
  AllocatorStats before = allocator_stats(Device::cpu());
  {
    Tensor t = Tensor::empty({1000}, DType::F64);
    AllocatorStats during = allocator_stats(Device::cpu());
    REQUIRE(during.allocations == before.allocations + 1);
    REQUIRE(during.bytes_in_use >= before.bytes_in_use + 8000);
  }
  REQUIRE(allocator_stats(Device::cpu()).bytes_in_use == before.bytes_in_use);
}

TEST_CASE("tensor cuda: round trip and the caching allocator reuses blocks", "[tensor][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Tensor host = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor dev = host.to(Device::cuda());
  REQUIRE(dev.device().is_cuda());
  REQUIRE(dev.to(Device::cpu()).to_vector() == host.to_vector());
  Tensor strided = make_view(dev, {3, 2}, {1, 3}, 0).contiguous();
  REQUIRE(strided.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  void* first = nullptr;
  {
    Tensor a = Tensor::empty({1 << 20}, DType::F32, Device::cuda());
    first = a.raw_data();
  }
  Tensor b = Tensor::empty({1 << 20}, DType::F32, Device::cuda());
  REQUIRE(b.raw_data() == first);  // same rounded size: the cached block comes back
  REQUIRE(allocator_stats(Device::cuda()).bytes_in_use >= 4 << 20);
  REQUIRE_THROWS_WITH(Tensor::empty({int64_t(1) << 45}, DType::F32, Device::cuda()),
                      Catch::Contains("out of memory"));
}

TEST_CASE("tensor cuda: copy_ into a strided view writes exactly the view's elements",
          "[tensor][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // Column 1 of a [3, 4] zero tensor: shape [3], stride 4, offset 1.
  Tensor base = Tensor::zeros({3, 4}, DType::F32, Device::cuda());
  make_view(base, {3}, {4}, 1).copy_(Tensor::from_vector({1, 2, 3}, {3}).to(Device::cuda()));
  REQUIRE(base.to_vector() == std::vector<double>{0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0});
  // The whole tensor through its transpose [4, 3] (strides 1, 4): element (r, c) of base
  // receives source element (c, r) = 3 c + r.
  std::vector<double> values(12);
  for (int i = 0; i < 12; ++i) values[i] = i;
  make_view(base, {4, 3}, {1, 4}, 0).copy_(Tensor::from_vector(values, {4, 3}).to(Device::cuda()));
  std::vector<double> expected(12);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) expected[r * 4 + c] = 3 * c + r;
  }
  REQUIRE(base.to_vector() == expected);
}

TEST_CASE("tensor cuda: copy_ between overlapping contiguous parts of one storage",
          "[tensor][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // cudaMemcpy's areas may not overlap (the emulator refuses such a copy), so copy_ must copy
  // the source out first: shifting [0..7] right by one gives [0, 0, 1, .., 6].
  std::vector<double> values(8);
  for (int i = 0; i < 8; ++i) values[i] = i;
  Tensor x = Tensor::from_vector(values, {8}).to(Device::cuda());
  x.slice(0, 1, 8).copy_(x.slice(0, 0, 7));
  REQUIRE(x.to_vector() == std::vector<double>{0, 0, 1, 2, 3, 4, 5, 6});
  Tensor y = Tensor::from_vector(values, {8}).to(Device::cuda());
  y.slice(0, 0, 7).copy_(y.slice(0, 1, 8));  // and left
  REQUIRE(y.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 7});
}

TEST_CASE("contiguous grad: gathering a transposed view", "[tensor][contiguous][grad]") {
  Tensor x = test::random_leaf({3, 4}, 21);
  test::require_gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor t = in[0].transpose(0, 1);
        REQUIRE_FALSE(t.is_contiguous());
        return t.contiguous();
      },
      {x}, 1e-6);
}

TEST_CASE("clone grad: identity gradient, independent memory", "[tensor][clone][grad]") {
  Tensor x = test::random_leaf({2, 3}, 22);
  test::require_gradcheck([](const std::vector<Tensor>& in) { return in[0].clone() * 2.0; }, {x});
}

TEST_CASE("to_dtype grad: f32 -> f64 passes the gradient back as f32", "[tensor][to][grad]") {
  // L = sum(w * x.to(f64)) with w = [1, 2, 3]: dL/dx = w, delivered in x's dtype (f32).
  Tensor x = Tensor::from_vector({0.5, -1, 2}, {3}).set_requires_grad();
  Tensor w = Tensor::from_vector({1, 2, 3}, {3}, DType::F64);
  backward(sum(mul(x.to(DType::F64), w)));
  REQUIRE(x.grad().dtype() == DType::F32);
  REQUIRE(x.grad().to_vector() == std::vector<double>{1, 2, 3});
}
