// dropout on CUDA against the CPU: the uniforms come from the same Philox stream on both
// devices, so for the same generator state the masks, outputs and gradients are bit-identical
// to the CPU's f32 results (checked exactly), over odd sizes, p in (0, 1], and a large case.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using test::random_f32;

TEST_CASE("dropout cuda: same output and gradient as the cpu for the same generator state",
          "[dropout][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (int64_t n : {1, 7, 33, 255, 257, 1003, (1 << 20) + 3}) {
    for (double p : {0.1, 0.5, 0.9, 1.0}) {
      const std::string what = "n=" + std::to_string(n) + " p=" + std::to_string(p);
      Tensor x = random_f32({n}, seed++);
      Tensor w = random_f32({n}, seed++);
      // L = sum(dropout(x) * w): dx = w * mask, the mask the forward drew.
      auto run = [&](Tensor input, const Tensor& weight, uint64_t generator_seed) {
        engine::Generator gen(generator_seed);
        input.set_requires_grad(true);
        Tensor y = engine::dropout(input, p, /*training=*/true, gen);
        Tensor dx = engine::grad({engine::sum(engine::mul(y, weight))}, {input})[0];
        return std::vector<Tensor>{y.detach(), dx};
      };
      std::vector<Tensor> cpu = run(x.clone(), w, 77 + seed);
      std::vector<Tensor> cuda = run(x.to(Device::cuda()), w.to(Device::cuda()), 77 + seed);
      REQUIRE(cuda[0].device().is_cuda());
      // Same uniforms, same float expressions (u >= p, x * 1/(1-p), dy * mask): exact.
      test::require_close(cuda[0], cpu[0], 0.0, 0.0, "forward " + what);
      test::require_close(cuda[1], cpu[1], 0.0, 0.0, "backward " + what);
    }
  }
}

TEST_CASE("dropout cuda: p = 1 drops everything", "[dropout][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  engine::Generator gen(5);
  Tensor x = Tensor::ones({257}, DType::F32, Device::cuda());
  Tensor y = engine::dropout(x, 1.0, /*training=*/true, gen);
  for (double v : y.to_vector()) REQUIRE(v == 0.0);
}
