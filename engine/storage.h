// A flat, owned buffer of bytes on one device. Tensors share storages (views); the storage frees
// its memory when the last tensor referring to it goes away.
//
// The version counts the writes made into the buffer in place (Tensor::copy_, fill_, an optimizer
// step) once it was filled: autograd compares it with the version an op saw when it saved the
// tensor for its backward (autograd.h). Writes through data<T>() pointers are not counted; code
// that updates an existing tensor that way calls Tensor::mark_written_in_place().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/device.h"

namespace engine {

class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
};

}  // namespace engine
