// Small builders shared by the loss and miner tests.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace losses_test {

inline engine::Tensor f64(const std::vector<double>& values, const engine::Shape& shape) {
  return engine::Tensor::from_vector(values, shape, engine::DType::F64);
}

inline engine::Tensor labels_of(const std::vector<int64_t>& values) {
  return engine::Tensor::from_indices(values, {static_cast<int64_t>(values.size())});
}

inline engine::Tensor index(const std::vector<int64_t>& values) { return labels_of(values); }

// An SPC-2 label vector [0, 0, c1, c1, ...]: pair i gets class i % classes.
inline std::vector<int64_t> spc2_labels(int64_t pairs, int64_t classes) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < pairs; ++i) {
    out.push_back(i % classes);
    out.push_back(i % classes);
  }
  return out;
}

}  // namespace losses_test
