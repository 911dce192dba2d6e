// A flat, owned buffer of bytes on one device. Tensors share storages (views); the storage frees
// its memory when the last tensor referring to it goes away.
#pragma once

#include <cstddef>
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

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
};

}  // namespace engine
