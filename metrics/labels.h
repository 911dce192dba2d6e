// Class labels for the metrics layer: any int64 values (not necessarily 0..C-1), one per row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace metrics {

// Labels from a 1-D integer tensor of `expected_count` entries (the I64 that engine::load_npy
// makes of i64, i32 and u8 files). `what` names the source (the file) in errors.
std::vector<int64_t> labels_from_tensor(const engine::Tensor& labels, int64_t expected_count,
                                        const std::string& what);

struct LabelGroups {
  std::vector<int64_t> classes;               // distinct labels, ascending
  std::vector<std::vector<int64_t>> members;  // members[c]: rows with label classes[c], ascending
  std::vector<int64_t> class_of;              // class_of[i]: the dense class id of row i
};
LabelGroups group_by_label(const std::vector<int64_t>& labels);

}  // namespace metrics
