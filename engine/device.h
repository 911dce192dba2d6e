// Where a tensor lives. A tensor's device is part of the tensor (there is no global mode); moving
// data is always an explicit Tensor::to(device).
#pragma once

#include <string>

namespace engine {

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return Device{DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return Device{DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
  std::string str() const;  // "cpu" or "cuda:0"
};

// Number of usable CUDA devices: 0 when built without CUDA or on any CUDA error (no driver, no
// GPU). Asked lazily on first call and cached; never called during static initialization.
int cuda_device_count();
inline bool cuda_available() { return cuda_device_count() > 0; }

// Makes the visible GPU `ordinal` this process's GPU: the one that cuda:0 names from then on (the
// engine, its kernels, cuBLAS and cuDNN run on the current device). For a process that is one of
// several ranks on a machine (engine::dist::rank_cuda_device); call it before the first CUDA
// tensor. Throws engine::Error when CUDA refuses.
void use_cuda_device(int ordinal);

// CUDA when a GPU is present, else CPU (the default of `--device`).
Device default_device();

// Parses "cpu", "cuda", "cuda:1"; throws engine::Error otherwise.
Device parse_device(const std::string& text);

}  // namespace engine
