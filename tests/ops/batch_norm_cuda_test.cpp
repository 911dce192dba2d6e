// batch_norm with K branches on CUDA against the CPU reference (which accumulates in f64, so it
// is the more accurate side): forward in training (output, running stats after the update) and
// eval, backward (dx, dweight, dbias, and the partial requests an attack or a frozen layer
// makes), for K = 1, 2, 3 with odd N, C and H*W, [N, C] and [N, C, H, W], an unused branch, a
// large-mean input (where E[x^2] - E[x]^2 in f32 would fail), and the ResNet-18 BN shapes at
// batch 4. Tolerances come from tests/support/tolerance.h, scaled by the reduction length m of a
// (route, channel) and by the typical magnitude of each result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "tests/support/allclose.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tolerance.h"

using engine::BatchNormRoute;
using engine::Device;
using engine::DType;
using engine::Shape;
using engine::Tensor;

namespace {

constexpr double kMomentum = 0.1;
constexpr double kEps = 1e-5;

// One configuration: x's shape, the number of branches and the routing table.
struct BnCase {
  Shape shape;
  int64_t K = 1;
  std::vector<BatchNormRoute> routes;
  double mean = 0.5, stddev = 2.0;  // of x
};

// All inputs, made once on the CPU in f32 and copied to each device.
struct BnInputs {
  Tensor x, weight, bias, running_mean, running_var, dy;
};

BnInputs make_inputs(const BnCase& c, uint64_t seed) {
  engine::Generator gen(seed);
  const int64_t C = c.shape[1];
  BnInputs in;
  in.x = engine::normal(c.shape, c.mean, c.stddev, gen);
  in.weight = engine::uniform({c.K, C}, 0.5, 1.5, gen);
  in.bias = engine::uniform({c.K, C}, -0.5, 0.5, gen);
  in.running_mean = engine::uniform({c.K, C}, -0.2, 0.2, gen);
  in.running_var = engine::uniform({c.K, C}, 0.5, 1.5, gen);
  in.dy = engine::uniform(c.shape, -1.0, 1.0, gen);
  return in;
}

Tensor copy_to(const Tensor& t, Device device) {
  Tensor out = Tensor::empty(t.shape(), t.dtype(), device);
  out.copy_(t);
  return out;
}

// Which gradients to ask for: x, weight, bias.
struct Wanted {
  bool x = true, weight = true, bias = true;
};

struct BnResult {
  Tensor y, running_mean, running_var, dx, dweight, dbias;
};

BnResult run(const BnCase& c, const BnInputs& in, bool training, Device device,
             Wanted wanted = {}) {
  Tensor x = copy_to(in.x, device).set_requires_grad(wanted.x);
  Tensor weight = copy_to(in.weight, device).set_requires_grad(wanted.weight);
  Tensor bias = copy_to(in.bias, device).set_requires_grad(wanted.bias);
  BnResult r;
  r.running_mean = copy_to(in.running_mean, device);
  r.running_var = copy_to(in.running_var, device);
  r.y = engine::batch_norm(x, weight, bias, r.running_mean, r.running_var, c.routes, training,
                           kMomentum, kEps);
  std::vector<Tensor> inputs;
  if (wanted.x) inputs.push_back(x);
  if (wanted.weight) inputs.push_back(weight);
  if (wanted.bias) inputs.push_back(bias);
  if (inputs.empty()) return r;
  std::vector<Tensor> grads = engine::grad({r.y}, inputs, {copy_to(in.dy, device)});
  size_t next = 0;
  if (wanted.x) r.dx = grads[next++];
  if (wanted.weight) r.dweight = grads[next++];
  if (wanted.bias) r.dbias = grads[next++];
  return r;
}

// The longest reduction of the case: the values of one (route, channel).
int64_t longest_route(const BnCase& c) {
  const int64_t HW = c.shape.size() == 4 ? c.shape[2] * c.shape[3] : 1;
  int64_t m = 0;
  for (const BatchNormRoute& route : c.routes) m = std::max(m, (route.end - route.begin) * HW);
  return m;
}

void require_close_tol(const Tensor& cuda, const Tensor& cpu, test::Tolerance tol,
                       const std::string& what) {
  REQUIRE(cuda.defined());
  REQUIRE(cuda.device().is_cuda());
  test::require_close(cuda, cpu, tol.atol, tol.rtol, what);
}

// Runs the case on both devices and compares everything that was computed.
void compare(const BnCase& c, bool training, uint64_t seed, Wanted wanted = {}) {
  const BnInputs in = make_inputs(c, seed);
  const BnResult cpu = run(c, in, training, Device::cpu(), wanted);
  const BnResult cuda = run(c, in, training, Device::cuda(), wanted);
  const int64_t m = longest_route(c);
  const std::string mode = training ? " (train)" : " (eval)";
  // y is O(weight * 4 std / std + bias) ~ 6 at most.
  require_close_tol(cuda.y, cpu.y, test::reduction_tolerance(m, 6.0), "y" + mode);
  // Running stats: mean ~ the data's mean, var ~ its variance.
  const double scale = std::fabs(c.mean) + c.stddev * c.stddev;
  require_close_tol(cuda.running_mean, cpu.running_mean, test::reduction_tolerance(m, scale),
                    "running_mean" + mode);
  require_close_tol(cuda.running_var, cpu.running_var, test::reduction_tolerance(m, scale),
                    "running_var" + mode);
  // dx ~ weight * invstd * |dy| ~ 1 / std; dweight and dbias are sums of m terms of random sign,
  // so ~ sqrt(m).
  if (wanted.x) {
    require_close_tol(cuda.dx, cpu.dx, test::reduction_tolerance(m, 2.0), "dx" + mode);
  }
  const double sum_scale = std::sqrt(double(m)) + 1.0;
  if (wanted.weight) {
    require_close_tol(cuda.dweight, cpu.dweight, test::reduction_tolerance(m, sum_scale),
                      "dweight" + mode);
  }
  if (wanted.bias) {
    require_close_tol(cuda.dbias, cpu.dbias, test::reduction_tolerance(m, sum_scale),
                      "dbias" + mode);
  }
}

void compare_train_and_eval(const BnCase& c, uint64_t seed) {
  compare(c, true, seed);
  compare(c, false, seed + 1);
}

}  // namespace

TEST_CASE("batch_norm cuda: batch_norm1d [N, C], one branch, odd sizes", "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  compare_train_and_eval({{7, 5}, 1, {{0, 7, 0}}}, 1);
  compare_train_and_eval({{2, 1}, 1, {{0, 2, 0}}}, 3);         // the smallest trainable batch
  compare_train_and_eval({{129, 1031}, 1, {{0, 129, 0}}}, 5);  // C2F2-BN's 1024 linear, odd
}

TEST_CASE("batch_norm cuda: batch_norm1d with K = 2 and K = 3 branches", "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  compare_train_and_eval({{9, 13}, 2, {{0, 4, 1}, {4, 9, 0}}}, 7);
  compare_train_and_eval({{11, 6}, 3, {{0, 3, 0}, {3, 8, 2}, {8, 11, 1}}}, 9);
}

TEST_CASE("batch_norm cuda: batch_norm2d, K = 1, 2, 3, odd N, C and H*W", "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  compare_train_and_eval({{5, 3, 7, 9}, 1, {{0, 5, 0}}}, 11);
  compare_train_and_eval({{7, 5, 3, 5}, 2, {{0, 3, 1}, {3, 7, 0}}}, 13);
  compare_train_and_eval({{9, 6, 1, 1}, 3, {{0, 2, 0}, {2, 5, 2}, {5, 9, 1}}}, 15);
  compare_train_and_eval({{3, 7, 33, 31}, 3, {{0, 1, 2}, {1, 2, 0}, {2, 3, 1}}}, 17);
}

TEST_CASE("batch_norm cuda: an unused branch gets zero gradients and keeps its running stats",
          "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const BnCase c{{6, 4, 5, 5}, 3, {{0, 4, 2}, {4, 6, 0}}};  // branch 1 unused
  compare_train_and_eval(c, 19);
  const BnInputs in = make_inputs(c, 21);
  const BnResult cuda = run(c, in, true, Device::cuda());
  // Row 1 of the [K, C] tensors: untouched stats, zero parameter gradients.
  const std::vector<double> rm = cuda.running_mean.to_vector(), rm0 = in.running_mean.to_vector();
  const std::vector<double> dw = cuda.dweight.to_vector(), db = cuda.dbias.to_vector();
  for (int64_t ch = 0; ch < 4; ++ch) {
    REQUIRE(rm[4 + ch] == rm0[4 + ch]);
    REQUIRE(dw[4 + ch] == 0.0);
    REQUIRE(db[4 + ch] == 0.0);
  }
}

TEST_CASE("batch_norm cuda: partial gradient requests (dx only, parameters only)",
          "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  const BnCase c{{5, 3, 4, 7}, 2, {{0, 2, 0}, {2, 5, 1}}};
  // dx alone in training: the engine supplies the per-channel sums the dx pass needs.
  compare(c, true, 23, Wanted{true, false, false});
  compare(c, false, 25, Wanted{true, false, false});  // an attack's grad(loss, {image})
  compare(c, true, 27, Wanted{false, true, false});
  compare(c, false, 29, Wanted{false, false, true});
  compare(c, true, 31, Wanted{false, false, false});  // forward only
}

TEST_CASE("batch_norm cuda: a large-mean input keeps its variance (no E[x^2] - E[x]^2)",
          "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // x ~ N(1000, 1): in f32, E[x^2] = 1e6 has an ulp of 0.06, so the textbook one-pass variance
  // would be off by several percent. Welford's running mean is rounded to ulp(1000) / 2 = 3e-5
  // per update; over the ~10 updates of a thread that stays below 2e-4 in xhat, so y, whose
  // magnitude is ~4, must agree to 2e-3.
  const BnCase c{{6, 3, 20, 20}, 2, {{0, 2, 1}, {2, 6, 0}}, 1000.0, 1.0};
  const BnInputs in = make_inputs(c, 33);
  const BnResult cpu = run(c, in, true, Device::cpu(), Wanted{false, false, false});
  const BnResult cuda = run(c, in, true, Device::cuda(), Wanted{false, false, false});
  test::require_close(cuda.y, cpu.y, 2e-3, 0.0, "y, mean 1000");
  // The running statistics take 0.1 of the batch's: a mean of ~1000 off by the same 2e-4 moves
  // running_mean by 2e-5 (its own ulp near 100 is 8e-6), and a variance of ~1 whose deviations
  // carry that 2e-4 error moves running_var by a few 1e-5; 1e-3 and 2e-3 leave a factor of ~50
  // while a one-pass E[x^2] - E[x]^2 (off by several percent of 1) would fail running_var.
  test::require_close(cuda.running_mean, cpu.running_mean, 1e-3, 1e-6, "running_mean, mean 1000");
  test::require_close(cuda.running_var, cpu.running_var, 2e-3, 0.0, "running_var, mean 1000");
}

TEST_CASE("batch_norm cuda: ResNet-18 BN shapes at batch 4, conv1 (64 x 112 x 112)",
          "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  compare({{4, 64, 112, 112}, 1, {{0, 4, 0}}}, true, 41);
}

TEST_CASE("batch_norm cuda: ResNet-18 BN shapes at batch 4, layer1 to layer4",
          "[batch_norm][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  compare({{4, 64, 56, 56}, 1, {{0, 4, 0}}}, true, 43);
  compare({{4, 128, 28, 28}, 2, {{0, 2, 0}, {2, 4, 1}}}, true, 45);  // MDProp-style halves
  compare({{4, 256, 14, 14}, 1, {{0, 4, 0}}}, true, 47);
  compare({{4, 512, 7, 7}, 1, {{0, 4, 0}}}, true, 49);
  compare({{4, 512, 7, 7}, 1, {{0, 4, 0}}}, false, 51);
}
