// Embedding images with a model: what `dml embed`, evaluation and attacks' bookkeeping use.
// The model runs in eval mode (BN on the running statistics of its eval branch, dropout off)
// with the tape off; the output is the model's raw embedding, before any L2 normalization.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/device.h"
#include "engine/tensor.h"
#include "models/model.h"

namespace models {

// The device and dtype of a module's first parameter (CPU / f32 for a module without any).
engine::Device module_device(const engine::nn::Module& module);
engine::DType module_dtype(const engine::nn::Module& module);

// Throws engine::Error naming `what` and the first offending element unless every value of the
// floating tensor `images` is finite and in [0, 1] (catches 0..255 pixels and NaNs early).
void check_pixels(const engine::Tensor& images, const std::string& what);

// One forward of images [B, C, H, W] (any device and floating dtype; moved to the model's) in
// eval mode without the tape. Returns f32 [B, D] on the CPU. The model's train/eval mode is
// restored afterwards.
engine::Tensor embed_batch(Model& model, const engine::Tensor& images);

struct EmbedOptions {
  int64_t batch_size = 256;
  // Called after every batch with (images done, total); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// All of images [N, C, H, W] in batches of options.batch_size: f32 [N, D] on the CPU, equal to
// embed_batch of the whole tensor (BN in eval mode makes rows independent of each other).
engine::Tensor embed(Model& model, const engine::Tensor& images, const EmbedOptions& options = {});

}  // namespace models
