// The CUDA emulator's stand-in for CUB's DeviceRadixSort::SortKeys: ascending order of the key
// bits [begin_bit, end_bit), stable (as CUB's radix sort is), written with std::stable_sort on
// unsigned keys. Like CUB, a call with no temporary storage only reports how much it needs.
// (Contract of the emulator: ../../cuda_runtime.h.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include <cuda_runtime.h>

namespace cub {

struct DeviceRadixSort {
  template <typename Key>
  static cudaError_t SortKeys(void* temp_storage, std::size_t& temp_storage_bytes,
                              const Key* keys_in, Key* keys_out, int num_items, int begin_bit = 0,
                              int end_bit = static_cast<int>(sizeof(Key) * 8),
                              cudaStream_t = nullptr) {
    static_assert(std::is_unsigned<Key>::value, "the emulator sorts unsigned keys only");
    if (temp_storage == nullptr) {
      temp_storage_bytes = 256;
      return cudaSuccess;
    }
    const int bits = static_cast<int>(sizeof(Key) * 8);
    if (num_items < 0 || begin_bit < 0 || end_bit > bits || begin_bit >= end_bit) {
      return cudaErrorInvalidValue;
    }
    if (!emu::is_device_pointer_or_null(temp_storage) || !emu::is_device_pointer_or_null(keys_in) ||
        !emu::is_device_pointer_or_null(keys_out)) {
      return cudaErrorInvalidDevicePointer;
    }
    const Key mask = end_bit - begin_bit == bits
                         ? static_cast<Key>(~Key(0))
                         : static_cast<Key>((Key(1) << (end_bit - begin_bit)) - 1);
    const auto digits = [&](Key k) { return static_cast<Key>((k >> begin_bit) & mask); };
    std::copy(keys_in, keys_in + num_items, keys_out);
    std::stable_sort(keys_out, keys_out + num_items,
                     [&](Key a, Key b) { return digits(a) < digits(b); });
    return cudaSuccess;
  }
};

}  // namespace cub
