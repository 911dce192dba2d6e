// PyTorch checkpoints: the files torch.save writes (`.pth`, `.pt`, Lightning's `.ckpt`), read
// without Python so that torchvision's ImageNet weights and robrank/MDProp checkpoints load as
// they are published. Reading only; dml writes safetensors.
//
// File layout (torch.save since PyTorch 1.6; torch/serialization.py, caffe2/serialize/
// inline_container.cc): a zip archive (engine/io/zip_archive.h) of STORED records under one
// folder whose name varies ("archive/", or the file's stem):
//   <prefix>/data.pkl              the pickled object (engine/io/torch_pickle.h), protocol 2
//   <prefix>/byteorder             "little" (absent in files older than PyTorch 1.10)
//   <prefix>/data/<key>            one storage's elements, raw, in that byte order
//   <prefix>/version, .data/...    format version and serialization id (not needed to read)
// Each tensor in data.pkl is _rebuild_tensor_v2(storage, offset, size, stride, ...): a view of
// the storage persistent id ('storage', torch.<T>Storage, key, location, numel), whose bytes are
// record <prefix>/data/<key>. Views may be strided (a transposed weight) and several tensors may
// share one storage; each tensor is copied out in row-major order. The location (cpu, cuda:0) is
// ignored: everything loads on the CPU.
//
// Which dict holds the weights:
//   * the pickled object itself, when it is a dict whose values are all tensors (a state dict:
//     torch.save(model.state_dict(), f), torchvision's files);
//   * else its entry "state_dict", "model_state_dict", "model" or "net", the first of these that
//     is a dict of tensors (Lightning's .ckpt, robrank, MDProp, the common training scripts).
//   When every key of that dict starts with "module." (a model saved through nn.DataParallel or
//   DistributedDataParallel) the prefix is removed.
//
// Element types (storage type -> RawTensor dtype): Float -> F32, Double -> F64, Half -> F16,
// BFloat16 -> BF16, Long -> I64 (num_batches_tracked), Int -> I64 (widened), Byte -> U8. Refused,
// each by name with the file and the tensor: the legacy non-zip format (torch.save before 1.6,
// or _use_new_zipfile_serialization=False) and the older tar format, TorchScript archives
// (torch.jit.save), compressed or encrypted records, big-endian files, any pickled global outside
// torch_pickle.h's list (arbitrary classes, torch.storage._load_from_bytes), Bool/Char/Short
// storages and every other dtype, views reaching outside their storage or overlapping themselves
// (more elements than the storage holds: an expand()ed tensor), duplicate keys, and a data.pkl
// larger than kMaxPthPickleBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/tensor.h"

namespace engine {

constexpr std::size_t kMaxPthPickleBytes = 64u << 20;

struct PthFile {
  std::vector<std::pair<std::string, RawTensor>> tensors;  // in the dict's order
  std::string state_dict_key;          // "" when the file is the state dict itself
  bool removed_module_prefix = false;  // the keys had "module." (DataParallel), now removed
};

// Parses a whole file held in memory; `name_for_errors` stands for the path in messages.
PthFile parse_pth(const uint8_t* data, std::size_t size, const std::string& name_for_errors);
PthFile read_pth(const std::string& path);
// Tensor level, as load_safetensors: F16/BF16 widen to f32, integers become i64; CPU tensors.
std::map<std::string, Tensor> load_pth(const std::string& path);

// Whether `path` is read as a torch.save file rather than safetensors: by its extension (.pth,
// .pt, .ckpt, .bin), else, for any name but .safetensors, by its first bytes (a zip archive or
// the legacy format's magic, so that the legacy format gets its own error).
bool is_torch_checkpoint_path(const std::string& path);

}  // namespace engine
