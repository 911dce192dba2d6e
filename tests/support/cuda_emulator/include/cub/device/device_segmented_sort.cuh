// The CUDA emulator's stand-in for CUB's DeviceSegmentedSort::SortKeys (ascending keys within each
// segment [begin[s], end[s])), written with std::sort. Like CUB, a call with no temporary storage
// only reports how much it needs. (Contract of the emulator: ../../cuda_runtime.h.)
#pragma once

#include <algorithm>
#include <cstddef>

#include <cuda_runtime.h>

namespace cub {

struct DeviceSegmentedSort {
  template <typename Key, typename BeginOffsets, typename EndOffsets>
  static cudaError_t SortKeys(void* temp_storage, std::size_t& temp_storage_bytes,
                              const Key* keys_in, Key* keys_out, long num_items, long num_segments,
                              BeginOffsets begin, EndOffsets end, cudaStream_t = nullptr) {
    if (temp_storage == nullptr) {
      temp_storage_bytes = 256;
      return cudaSuccess;
    }
    if (!emu::is_device_pointer_or_null(temp_storage) || !emu::is_device_pointer_or_null(keys_in) ||
        !emu::is_device_pointer_or_null(keys_out)) {
      return cudaErrorInvalidDevicePointer;
    }
    std::copy(keys_in, keys_in + num_items, keys_out);
    for (long s = 0; s < num_segments; ++s) {
      if (begin[s] < end[s]) std::sort(keys_out + begin[s], keys_out + end[s]);
    }
    return cudaSuccess;
  }
};

}  // namespace cub
