// Batched, tape-free, eval-mode forward passes (contract in embed.h).
#include "models/embed.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "engine/autograd.h"
#include "kernels/common/check.h"

namespace models {

using engine::Tensor;

namespace {

// Eval mode for a scope; the previous mode comes back even when the forward throws.
class EvalScope {
 public:
  explicit EvalScope(engine::nn::Module& module)
      : module_(module), was_training_(module.is_training()) {
    module_.eval();
  }
  ~EvalScope() { module_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  engine::nn::Module& module_;
  bool was_training_;
};

}  // namespace

engine::Device module_device(const engine::nn::Module& module) {
  std::vector<Tensor> parameters = module.parameters();
  return parameters.empty() ? engine::Device::cpu() : parameters.front().device();
}

engine::DType module_dtype(const engine::nn::Module& module) {
  std::vector<Tensor> parameters = module.parameters();
  return parameters.empty() ? engine::DType::F32 : parameters.front().dtype();
}

void check_pixels(const Tensor& images, const std::string& what) {
  ENGINE_CHECK(images.defined() && engine::is_floating(images.dtype()), what,
               ": expected floating-point pixels in [0, 1], got ",
               images.defined() ? images.str() : std::string("undefined"));
  // Scan in place (a CPU copy only for device tensors): image arrays can be large.
  Tensor host = images.device().is_cpu() ? images.contiguous() : images.to(engine::Device::cpu());
  const float* f32 = host.dtype() == engine::DType::F32 ? host.data<float>() : nullptr;
  const double* f64 = f32 == nullptr ? host.data<double>() : nullptr;
  for (int64_t i = 0; i < host.numel(); ++i) {
    const double v = f32 != nullptr ? double(f32[i]) : f64[i];
    if (std::isfinite(v) && v >= 0.0 && v <= 1.0) continue;
    std::ostringstream hint;
    if (v > 1.0 && v <= 255.0) hint << " (0..255 pixels? divide by 255)";
    engine::fail(what, ": pixel values must be finite and in [0, 1]; element ", i, " of ",
                 images.str(), " is ", v, hint.str());
  }
}

Tensor embed_batch(Model& model, const Tensor& images) {
  model.check_input(images);
  EvalScope eval(model);
  engine::NoGradGuard no_grad;
  Tensor x = images.detach();
  if (x.device() != module_device(model)) x = x.to(module_device(model));
  if (x.dtype() != module_dtype(model)) x = x.to(module_dtype(model));
  Tensor y = model.forward(x);
  ENGINE_CHECK(y.dim() == 2 && y.size(0) == images.size(0) && y.size(1) == model.embedding_dim(),
               model.name(), ": expected embeddings [", images.size(0), ", ", model.embedding_dim(),
               "], got ", y.str());
  if (!y.device().is_cpu()) y = y.to(engine::Device::cpu());
  if (y.dtype() != engine::DType::F32) y = y.to(engine::DType::F32);
  return y.contiguous();
}

Tensor embed(Model& model, const Tensor& images, const EmbedOptions& options) {
  ENGINE_CHECK(options.batch_size > 0, "embed: batch_size must be positive, got ",
               options.batch_size);
  model.check_input(images);
  const int64_t n = images.size(0);
  Tensor out = Tensor::empty({n, model.embedding_dim()}, engine::DType::F32);
  for (int64_t begin = 0; begin < n; begin += options.batch_size) {
    const int64_t end = std::min(n, begin + options.batch_size);
    Tensor rows = out.slice(0, begin, end);
    rows.copy_(embed_batch(model, images.slice(0, begin, end)));
    if (options.progress) options.progress(end, n);
  }
  return out;
}

}  // namespace models
