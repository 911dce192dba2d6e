// Element types. F32 and F64 are the numeric types (f32 everywhere on the GPU, f64 on the CPU for
// gradient checks); I64 holds indices and labels and is never differentiated.
#pragma once

#include <cstddef>
#include <cstdint>

namespace engine {

enum class DType { F32, F64, I64 };

inline std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::F64:
      return 8;
    case DType::I64:
      return 8;
  }
  return 0;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::I64:
      return "i64";
  }
  return "?";
}

inline bool is_floating(DType dtype) { return dtype == DType::F32 || dtype == DType::F64; }

// The DType of a C++ element type: dtype_of<float>() == DType::F32.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::I64;
}

}  // namespace engine
