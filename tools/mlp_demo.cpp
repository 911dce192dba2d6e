// mlp_demo: the smallest end-to-end run of the engine. A two-layer MLP (2 -> 32 -> 2, ReLU) is
// trained with Adam and cross-entropy on two concentric noisy rings generated from a seeded
// Philox stream, printing one line per epoch and the final training accuracy.
//
//   mlp_demo [--epochs N (default 20)] [--seed S (default 2024)]
//
// Exit codes: 0 success (accuracy >= 99%), 1 runtime error or lower accuracy, 2 usage error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/nn/nn.h"
#include "engine/ops.h"
#include "engine/optim/adam.h"
#include "engine/random.h"
#include "tools/mlp_rings.h"

using engine::Tensor;
namespace nn = engine::nn;

using mlp_rings::accuracy;
using mlp_rings::Dataset;
using mlp_rings::make_rings;

namespace {

struct Args {
  int epochs = 20;
  uint64_t seed = 2024;
};

bool parse_int(const char* text, long long min, long long* out) {
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < min) return false;
  *out = value;
  return true;
}

int usage(const std::string& problem) {
  std::fprintf(stderr, "mlp_demo: %s\nusage: mlp_demo [--epochs N (>= 1)] [--seed S (>= 0)]\n",
               problem.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf("usage: mlp_demo [--epochs N] [--seed S]\n");
      return 0;
    }
    if (flag != "--epochs" && flag != "--seed") return usage("unknown argument '" + flag + "'");
    if (i + 1 >= argc) return usage(flag + " needs a value");
    long long value = 0;
    if (!parse_int(argv[++i], flag == "--epochs" ? 1 : 0, &value)) {
      return usage("invalid value '" + std::string(argv[i]) + "' for " + flag);
    }
    if (flag == "--epochs") {
      args.epochs = static_cast<int>(value);
    } else {
      args.seed = static_cast<uint64_t>(value);
    }
  }

  try {
    engine::Generator gen(args.seed);
    Dataset data = make_rings(200, gen);
    nn::Sequential model;
    model.push_back(std::make_shared<nn::Linear>(2, 32, true, gen));
    model.push_back(std::make_shared<nn::ReLU>());
    model.push_back(std::make_shared<nn::Linear>(32, 2, true, gen));
    engine::optim::AdamOptions options;
    options.lr = 0.01;
    engine::optim::Adam adam(model.parameters(), options);
    std::printf(
        "mlp_demo: 2 -> 32 -> 2 MLP (%lld parameters), Adam lr %g, %lld points on two "
        "rings, seed %llu\n",
        static_cast<long long>(model.parameter_count()), options.lr,
        static_cast<long long>(data.labels.numel()), static_cast<unsigned long long>(args.seed));

    const int64_t batch = 40;
    const int64_t n = data.labels.numel();
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      Tensor order = engine::permutation(n, gen);
      double epoch_loss = 0;
      for (int64_t start = 0; start < n; start += batch) {
        int64_t end = std::min(start + batch, n);
        Tensor rows = order.slice(0, start, end);
        Tensor loss = engine::cross_entropy(model(engine::index_select(data.points, rows)),
                                            engine::index_select(data.labels, rows));
        adam.zero_grad();
        engine::backward(loss);
        adam.step();
        epoch_loss += loss.item() * double(end - start) / double(n);
      }
      std::printf("epoch %3d/%d  loss %.4f  train accuracy %5.1f%%\n", epoch, args.epochs,
                  epoch_loss, 100.0 * accuracy(model, data));
    }
    double final_accuracy = accuracy(model, data);
    std::printf("final training accuracy: %.1f%%\n", 100.0 * final_accuracy);
    if (final_accuracy < 0.99) {
      std::fprintf(stderr, "mlp_demo: accuracy below the expected 99%%\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_demo: error: %s\n", e.what());
    return 1;
  }
}
