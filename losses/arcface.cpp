// ArcFace loss (math in arcface.h): normalized embeddings against normalized class centers, the
// target logit moved by the angular margin, then softmax cross-entropy.
#include "losses/arcface.h"

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "kernels/common/check.h"
#include "losses/distance.h"

namespace losses {
namespace {

// Keeps sqrt(1 - cos^2) >= ~1.4e-3 so its gradient cos / sqrt(1 - cos^2) is finite in f32.
constexpr double kCosineClamp = 1e-6;

}  // namespace

using engine::Tensor;

ArcFaceLoss::ArcFaceLoss(int64_t num_classes, int64_t embedding_dim, engine::Generator& gen,
                         const ArcFaceOptions& options, engine::DType dtype)
    : options_(options) {
  ENGINE_CHECK(num_classes >= 1 && embedding_dim >= 1,
               "ArcFaceLoss: need num_classes >= 1 and embedding_dim >= 1, got ", num_classes,
               " and ", embedding_dim);
  ENGINE_CHECK(std::isfinite(options.margin) && options.scale > 0.0 && options.centers_lr >= 0.0,
               "ArcFaceLoss: margin must be finite, scale > 0 and centers_lr >= 0, got margin ",
               options.margin, ", scale ", options.scale, ", centers_lr ", options.centers_lr);
  const double bound = 1.0 / std::sqrt(static_cast<double>(embedding_dim));
  centers_ = register_parameter(
      "centers", engine::uniform({num_classes, embedding_dim}, -bound, bound, gen, dtype));
}

Tensor ArcFaceLoss::logits(const Tensor& embeddings, const Tensor& labels) const {
  const std::vector<int64_t> y = check_labeled_batch(embeddings, labels, "arcface");
  const int64_t batch = embeddings.size(0), classes = centers_.size(0);
  ENGINE_CHECK(embeddings.size(1) == centers_.size(1), "arcface: embeddings ",
               engine::shape_str(embeddings.shape()), " do not match centers ",
               engine::shape_str(centers_.shape()));
  ENGINE_CHECK(embeddings.dtype() == centers_.dtype() && embeddings.device() == centers_.device(),
               "arcface: embeddings ", embeddings.str(), " and centers ", centers_.str(),
               " differ in dtype or device (move the loss with to())");
  std::vector<int64_t> target_at(static_cast<size_t>(batch));  // flat index of cos_{i, y_i}
  std::vector<double> one_hot(static_cast<size_t>(batch * classes), 0.0);
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t c = y[static_cast<size_t>(i)];
    ENGINE_CHECK(c >= 0 && c < classes, "arcface: label ", c, " of row ", i, " outside [0, ",
                 classes, ")");
    target_at[static_cast<size_t>(i)] = i * classes + c;
    one_hot[static_cast<size_t>(i * classes + c)] = 1.0;
  }

  Tensor cosine = engine::matmul(engine::l2_normalize(embeddings),
                                 engine::l2_normalize(centers_).transpose(0, 1));  // [B, C]
  if (options_.revisiting_compat) cosine = engine::clamp(cosine, 1e-10, 1.0 - 1e-10);
  const Tensor target = engine::index_select(
      cosine.reshape({batch * classes, 1}),
      Tensor::from_indices(target_at, {batch}, embeddings.device()));  // [B, 1]
  const Tensor c = engine::clamp(target, -1.0 + kCosineClamp, 1.0 - kCosineClamp);
  const Tensor sine = engine::sqrt(engine::add_scalar(engine::neg(c * c), 1.0));
  const Tensor with_margin =
      c * std::cos(options_.margin) - sine * std::sin(options_.margin);  // cos(theta + m)
  if (options_.revisiting_compat) {
    // The [B, 1] shift is added to every column of its row (that code's missing one-hot), so
    // softmax cross-entropy does not see it.
    return (cosine + (with_margin - c)) * options_.scale;
  }
  const Tensor mask =
      Tensor::from_vector(one_hot, {batch, classes}, embeddings.dtype(), embeddings.device());
  // Only the target column moves: cos_iy + (cos(theta + m) - cos_iy).
  return (cosine + mask * (with_margin - c)) * options_.scale;
}

Tensor ArcFaceLoss::loss(const Tensor& embeddings, const Tensor& labels) const {
  return engine::cross_entropy(logits(embeddings, labels), labels);
}

Tensor ArcFaceLoss::forward(const Tensor&) {
  engine::fail("ArcFaceLoss needs labels: call loss(embeddings, labels)");
}

engine::optim::AdamGroup ArcFaceLoss::param_group(double weight_decay) const {
  engine::optim::AdamGroup group;
  group.params = {centers_};
  group.options.lr = options_.centers_lr;
  group.options.weight_decay = weight_decay;
  return group;
}

}  // namespace losses
