// The fused SPC-2 triplet loss: checks, device dispatch and the autograd node (contract in
// fused_triplet.h; math in kernels/triplet/triplet.h).
#include "losses/fused_triplet.h"

#include <cmath>
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "kernels/common/check.h"
#include "kernels/triplet/triplet.h"

namespace losses {
namespace {

using engine::Tensor;

// Uniforms per Philox block (mine_triplets draws kMiningDrawsPerAnchor per anchor).
constexpr int64_t kUniformsPerBlock = 4;

// Shape, dtype and device checks that need no data (the CUDA path reads no labels on the host).
void check_inputs(const Tensor& embeddings, const Tensor& labels, double margin) {
  ENGINE_CHECK(
      embeddings.defined() && embeddings.dim() == 2 && engine::is_floating(embeddings.dtype()),
      "spc2_triplet_fused: expected floating-point embeddings [B, D], got ",
      embeddings.defined() ? embeddings.str() : "undefined");
  const int64_t batch = embeddings.size(0), dim = embeddings.size(1);
  ENGINE_CHECK(
      batch >= 2 && batch % 2 == 0 && batch <= engine::kernels::kFusedTripletMaxBatch && dim >= 1,
      "spc2_triplet_fused: expected an SPC-2 batch [B, D] with B even, 2 <= B <= ",
      engine::kernels::kFusedTripletMaxBatch, " and D >= 1, got ",
      engine::shape_str(embeddings.shape()));
  ENGINE_CHECK(labels.defined() && labels.dtype() == engine::DType::I64 && labels.dim() == 1 &&
                   labels.size(0) == batch,
               "spc2_triplet_fused: expected labels i64 [", batch, "] for embeddings ",
               engine::shape_str(embeddings.shape()), ", got ",
               labels.defined() ? labels.str() : "undefined");
  ENGINE_CHECK(labels.device() == embeddings.device(), "spc2_triplet_fused: labels on ",
               labels.device().str(), " but embeddings on ", embeddings.device().str(),
               " (move the labels once, outside the training step)");
  if (embeddings.device().is_cuda()) {
    ENGINE_CHECK(embeddings.dtype() == engine::DType::F32,
                 "spc2_triplet_fused: the CUDA kernels take f32, got ", embeddings.str());
  }
  ENGINE_CHECK(std::isfinite(margin), "spc2_triplet_fused: margin must be finite, got ", margin);
}

}  // namespace

FusedTriplet spc2_triplet_fused(const Tensor& embeddings, const Tensor& labels, Miner miner,
                                Metric metric, engine::Generator& gen, double margin) {
  check_inputs(embeddings, labels, margin);
  const engine::Device device = embeddings.device();
  if (device.is_cpu()) check_spc2_batch(embeddings, labels, "spc2_triplet_fused");
  const int64_t batch = embeddings.size(0), dim = embeddings.size(1), pairs = batch / 2;
  const bool wants_gradient = engine::needs_tape({embeddings});

  // The same Philox blocks engine::uniform({2P}, ...) would take inside mine_triplets.
  const uint64_t offset = gen.take(static_cast<uint64_t>(
      (pairs * engine::kernels::kMiningDrawsPerAnchor + kUniformsPerBlock - 1) /
      kUniformsPerBlock));

  const Tensor x = embeddings.detach().contiguous();
  const Tensor y = labels.contiguous();
  FusedTriplet out;
  Tensor loss = Tensor::empty({}, x.dtype(), device);
  Tensor gradient;
  if (wants_gradient) gradient = Tensor::empty(x.shape(), x.dtype(), device);
  out.triplets.anchor = Tensor::empty({pairs}, engine::DType::I64, device);
  out.triplets.positive = Tensor::empty({pairs}, engine::DType::I64, device);
  out.triplets.negative = Tensor::empty({pairs}, engine::DType::I64, device);
  out.triplets.hardness = Tensor::empty({pairs}, x.dtype(), device);
  int64_t* anchor = out.triplets.anchor.data<int64_t>();
  int64_t* positive = out.triplets.positive.data<int64_t>();
  int64_t* negative = out.triplets.negative.data<int64_t>();

  if (device.is_cuda()) {
    engine::kernels::fused_triplet_cuda(x.data<float>(), y.data<int64_t>(), batch, dim, miner,
                                        metric, margin, gen.seed, offset, loss.data<float>(),
                                        wants_gradient ? gradient.data<float>() : nullptr, anchor,
                                        positive, negative, out.triplets.hardness.data<float>());
  } else if (x.dtype() == engine::DType::F32) {
    engine::kernels::fused_triplet_cpu<float>(
        x.data<float>(), y.data<int64_t>(), batch, dim, miner, metric, margin, gen.seed, offset,
        loss.data<float>(), wants_gradient ? gradient.data<float>() : nullptr, anchor, positive,
        negative, out.triplets.hardness.data<float>());
  } else {
    engine::kernels::fused_triplet_cpu<double>(
        x.data<double>(), y.data<int64_t>(), batch, dim, miner, metric, margin, gen.seed, offset,
        loss.data<double>(), wants_gradient ? gradient.data<double>() : nullptr, anchor, positive,
        negative, out.triplets.hardness.data<double>());
  }

  if (!wants_gradient) {
    out.loss = loss;
    return out;
  }
  // dL/dx was computed with the forward; the chain rule only scales it.
  engine::BackwardFn backward = [gradient](const Tensor& grad_output,
                                           const std::vector<bool>& needs) {
    if (!needs[0]) return std::vector<Tensor>{Tensor()};
    return std::vector<Tensor>{engine::mul(gradient, grad_output)};
  };
  out.loss = engine::record("spc2_triplet_loss_fused", {embeddings}, loss, std::move(backward));
  return out;
}

Tensor spc2_triplet_loss_fused(const Tensor& embeddings, const Tensor& labels, Miner miner,
                               Metric metric, engine::Generator& gen, double margin) {
  return spc2_triplet_fused(embeddings, labels, miner, metric, gen, margin).loss;
}

}  // namespace losses
