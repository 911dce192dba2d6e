// CPU and CUDA embeddings of the same weights agree (skipped without a GPU).
//
// Tolerance: f32 on both devices, but different summation orders in every conv/GEMM (reductions
// of up to 3 * 3 * 512 = 4608 terms) compound through the layers; 1e-3 relative to the largest
// embedding entry is far below any retrieval-relevant difference and far above order noise.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/nn/nn.h"
#include "engine/random.h"
#include "models/embed.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tests/models/helpers.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"

using engine::Tensor;
namespace nn = engine::nn;

namespace {

std::shared_ptr<models::Model> build(const std::string& name, int64_t dim, int64_t k = 1) {
  auto model = models_test::build_model(41, name, dim, k);
  // Non-trivial BN statistics so the eval path is really exercised.
  engine::Generator stats(42);
  for (nn::BatchNorm* bn : nn::batch_norm_layers(*model)) {
    const engine::Shape shape = bn->weight().shape();
    Tensor(bn->running_mean()).copy_(engine::uniform(shape, -0.2, 0.2, stats));
    Tensor(bn->running_var()).copy_(engine::uniform(shape, 0.5, 1.5, stats));
    Tensor(bn->weight()).copy_(engine::uniform(shape, 0.5, 1.5, stats));
  }
  return model;
}

void require_cpu_cuda_agree(const std::string& name, const engine::Shape& image_shape) {
  INFO(name);
  auto model = build(name, 32);
  engine::Generator gen(43);
  engine::Shape shape = {5};
  shape.insert(shape.end(), image_shape.begin(), image_shape.end());
  Tensor images = engine::uniform(shape, 0.0, 1.0, gen);
  models::EmbedOptions options;
  options.batch_size = 3;
  Tensor cpu = models::embed(*model, images, options);
  model->to(engine::Device::cuda());
  REQUIRE(models::module_device(*model).is_cuda());
  Tensor cuda = models::embed(*model, images, options);  // images move batch by batch
  REQUIRE(cuda.device().is_cpu());
  double largest = 0;
  for (double v : cpu.to_vector()) largest = std::max(largest, std::fabs(v));
  test::require_close(cuda, cpu, 1e-3 * largest, 1e-3, name + " cuda vs cpu");
}

}  // namespace

TEST_CASE("models cuda: c2f2 embeddings match the CPU", "[models][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  require_cpu_cuda_agree("c2f2", {1, 28, 28});
}

TEST_CASE("models cuda: c2f2-bn embeddings match the CPU", "[models][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  require_cpu_cuda_agree("c2f2-bn", {1, 28, 28});
}

TEST_CASE("models cuda: resnet18 embeddings match the CPU", "[models][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  require_cpu_cuda_agree("resnet18", {3, 64, 64});
}

// [heavy]: racecheck and initcheck skip it (tools/gpu_check.sh); memcheck and ctest run it.
TEST_CASE("models cuda: resnet50 embeddings match the CPU", "[models][cuda][heavy]") {
  REQUIRE_CUDA_OR_SKIP();
  require_cpu_cuda_agree("resnet50", {3, 64, 64});
}

TEST_CASE("models cuda: weights saved from a CUDA model load on the CPU", "[models][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  auto model = build("c2f2-bn", 8, 2);
  model->to(engine::Device::cuda());
  // Change every floating tensor on the device after the move, so the file can only hold these
  // values if the save reads the device's memory (not a host copy from before the move).
  std::map<std::string, std::vector<double>> saved_values;
  engine::NoGradGuard no_grad;
  for (const auto& entry : model->state_dict()) {
    Tensor tensor = entry.second;
    if (tensor.dtype() == engine::DType::I64) continue;
    REQUIRE(tensor.device().is_cuda());
    tensor.copy_(tensor * 0.5 + 0.25);
    saved_values[entry.first] = tensor.to(engine::Device::cpu()).to_vector();
  }
  const std::string path = "/tmp/models_cuda_test_" + std::to_string(::getpid()) + ".safetensors";
  models::save_weights(*model, path);
  // Another seed: before the load, the fresh model holds none of the saved values.
  models::ModelConfig config;
  config.name = "c2f2-bn";
  config.embedding_dim = 8;
  config.bn_branches = 2;
  engine::Generator other(99);
  auto fresh = models::build_model(config, other);
  const bool fresh_differs =
      fresh->state_dict().at("fc2.weight").to_vector() != saved_values.at("fc2.weight");
  REQUIRE(fresh_differs);
  models::load_weights(*fresh, path);
  std::remove(path.c_str());
  size_t compared = 0;
  for (const auto& entry : fresh->state_dict()) {
    if (entry.second.dtype() == engine::DType::I64) continue;
    INFO(entry.first);
    const bool loaded = entry.second.to_vector() == saved_values.at(entry.first);  // no dump
    CHECK(loaded);
    ++compared;
  }
  CHECK(compared == saved_values.size());
}
