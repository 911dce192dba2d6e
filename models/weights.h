// Model weights as safetensors files (engine/io/safetensors.h); PyTorch checkpoints written by
// torch.save (.pth, .pt, .ckpt, .bin, or any file starting with a zip signature) are read too,
// through engine/io/pth.h (its state dict, under 'state_dict' etc. for a checkpoint dict, without
// a DataParallel `module.` prefix), and then go through the same names and checks.
//
// Names are the model's state_dict keys: exactly torchvision's for the ResNets (conv1.weight,
// bn1.running_mean, layer2.0.downsample.1.weight, fc.bias, ...), conv1/conv2/fc1/fc2 (+ bn1..bn3)
// for C2F2, and `<bn>.aux_bn.<k-1>.{weight,bias,running_mean,running_var,num_batches_tracked}`
// for BN branches k >= 1 (timm's SplitBatchNorm2d spelling). So a torchvision checkpoint
// converted with one line of Python (safetensors.torch.save_file(model.state_dict(), path))
// loads unchanged, and our files load in PyTorch.
//
// Loading accepts:
//   * MDProp's branch names: `<bn>.aux_bn1.X` -> `<bn>.aux_bn.0.X`, `<bn>.aux_bn2.X` ->
//     `<bn>.aux_bn.1.X` (aux_bnN -> aux_bn.<N-1>); a file naming one branch both ways is an error;
//   * missing `num_batches_tracked` (pre-1.0 torchvision checkpoints lack it);
//   * F32, F64, F16, BF16 tensors for floating parameters (converted to the model's dtype).
// Everything else that does not match is reported in ONE engine::Error naming the file and every
// missing, unexpected, mis-shaped, wrongly typed (integer data for a floating tensor) and
// non-finite key; the model is left untouched then.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/nn/module.h"

namespace models {

// "layer1.0.bn1.aux_bn2.weight" -> "layer1.0.bn1.aux_bn.1.weight"; other names unchanged.
std::string canonical_weight_name(const std::string& name);

struct WeightLoadOptions {
  // For a K-branch model loading a file without aux branches (e.g. ImageNet weights into an
  // MDProp model): a BN whose file entries have no aux_bn.* key at all gets branch 0's values
  // copied into every aux branch (MDProp's initialization) instead of "missing key" errors.
  bool aux_from_main = false;
  // State entries whose names start with one of these prefixes keep the model's own values; the
  // file's entries under them are ignored (neither loaded nor reported). `dml train`'s
  // model.pretrained uses {"fc."}: robrank replaces the ImageNet 1000-way fc with a fresh linear
  // layer of the embedding dimension.
  std::vector<std::string> keep_prefixes;
};

// Whose names a weight file uses: ours (= torchvision's, above), or robrank's (Zhou et al.'s code,
// a PyTorch Lightning checkpoint): its `state_dict` holds the network under `backbone.` (beside
// the loss's own entries, if any), a torchvision ResNet as it is, and its C2F2 as one
// nn.Sequential, `backbone.{0,3,7,9}.{weight,bias}` for conv1, conv2, fc1, fc2 (robrank
// models/template_rank.py, MetricTemplate28).
enum class WeightLayout { Ours, Robrank };
// "dml" or "robrank"; anything else is an engine::Error listing both.
WeightLayout parse_weight_layout(const std::string& text);

// The tensors of `path` (safetensors, or torch.save by engine::is_torch_checkpoint_path), as they
// are named there.
std::map<std::string, engine::Tensor> read_weight_file(const std::string& path);
// `tensors` renamed from `layout` to ours for model `model_name` (registry name). Robrank: only
// the `backbone.` entries, without the prefix; for c2f2 the Sequential indices 0, 3, 7, 9 become
// conv1, conv2, fc1, fc2. An engine::Error naming `source` when a robrank file has no
// `backbone.` entry, or a C2F2 one has an index that is none of those four.
std::map<std::string, engine::Tensor> rename_weights(std::map<std::string, engine::Tensor> tensors,
                                                     WeightLayout layout,
                                                     const std::string& model_name,
                                                     const std::string& source);

// Reads `path` (safetensors, or torch.save by engine::is_torch_checkpoint_path; names
// canonicalized) and loads it into `model` as described above.
void load_weights(engine::nn::Module& model, const std::string& path,
                  const WeightLoadOptions& options = {});
// The same from tensors already in memory; `source` names them in errors (e.g. the path).
void load_weights(engine::nn::Module& model, const std::map<std::string, engine::Tensor>& tensors,
                  const std::string& source, const WeightLoadOptions& options = {});

// Writes every state_dict entry (num_batches_tracked as I64 scalars, floats as F32 or F64 as
// held) atomically; metadata gets "format": "pt" unless given.
void save_weights(const engine::nn::Module& model, const std::string& path,
                  std::map<std::string, std::string> metadata = {});

}  // namespace models
