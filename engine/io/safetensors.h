// safetensors: the weight-file format of our models (docs/architecture.md), readable by PyTorch
// unchanged.
//
// File layout (huggingface/safetensors, research/ecosystem.md §6.1):
//   [8 bytes]  N, the header length, unsigned 64-bit little-endian (N <= 100,000,000)
//   [N bytes]  UTF-8 JSON object starting with '{', right-padded with spaces:
//              {"__metadata__": {"key": "value", ...},                    (optional, str -> str)
//               "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     the byte buffer: every tensor little-endian and row-major at [begin, end) relative
//              to the buffer start. The tensors cover the buffer exactly: sorted by offset they are
//              contiguous (no hole, no overlap) and end - begin = numel * dtype size.
//
// Two levels:
//  1. Raw (independent of Tensor): SafetensorsFile holds each tensor's dtype, shape and bytes
//     untouched, so F16/BF16 payloads (NaN bits included) survive a read/write round trip.
//  2. Tensor: load_safetensors / save_safetensors convert to and from engine::Tensor.
//
// Reading validates everything above and refuses duplicate keys; every problem is an
// engine::Error naming the file and the tensor or key. Writing is atomic (temp file, fsync,
// rename), sorts tensors by dtype alignment (descending) then name, and pads the JSON to a
// multiple of 8 bytes, as the reference writer does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace engine {

// The dtypes we read and write. The format defines more (BOOL, I8..U64, F8_*, C64, ...): those
// are refused with an "unsupported dtype" error.
enum class SafetensorsDType { F32, F64, F16, BF16, I64, U8 };

const char* safetensors_dtype_name(SafetensorsDType dtype);  // "F32", "BF16", ...
std::size_t safetensors_dtype_size(SafetensorsDType dtype);  // bytes per element

struct RawTensor {
  SafetensorsDType dtype = SafetensorsDType::F32;
  Shape shape;                 // empty = rank-0 scalar (one element)
  std::vector<uint8_t> bytes;  // numel * dtype size bytes, little-endian, row-major
};

struct SafetensorsFile {
  // In file order (by data offset) after reading; any order before writing (unique names).
  std::vector<std::pair<std::string, RawTensor>> tensors;
  std::map<std::string, std::string> metadata;

  const RawTensor* find(const std::string& name) const;  // nullptr when absent
};

// ---- level 1: raw ----
// Parses a whole file held in memory; `name_for_errors` stands for the path in messages.
SafetensorsFile parse_safetensors(const uint8_t* data, std::size_t size,
                                  const std::string& name_for_errors);
SafetensorsFile read_safetensors(const std::string& path);
// The exact bytes write_safetensors puts in the file.
std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file);
void write_safetensors(const std::string& path, const SafetensorsFile& file);

// ---- level 2: Tensor ----
// F32 -> f32, F64 -> f64, F16/BF16 -> f32 (exact widening), I64 -> i64, U8 -> i64 (integers
// stay integers; convert explicitly with .to(DType::F32) where pixels are wanted). CPU tensors.
Tensor tensor_from_raw(const RawTensor& raw, const std::string& name_for_errors = "tensor");
// f32 -> F32, f64 -> F64, i64 -> I64. CUDA tensors are copied to the host, views made contiguous.
RawTensor raw_from_tensor(const Tensor& tensor, const std::string& name_for_errors = "tensor");

// Every raw tensor through tensor_from_raw (errors name `path` and the tensor), freeing each one's
// bytes once converted so that the peak is one copy plus one tensor. Shared with engine/io/pth.h.
std::map<std::string, Tensor> tensors_from_raw(
    std::vector<std::pair<std::string, RawTensor>>& tensors, const std::string& path);

std::map<std::string, Tensor> load_safetensors(const std::string& path);
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace engine
