// Label validation and grouping (labels.h).
#include "metrics/labels.h"

#include <algorithm>

#include "kernels/common/check.h"

namespace metrics {

std::vector<int64_t> labels_from_tensor(const engine::Tensor& labels, int64_t expected_count,
                                        const std::string& what) {
  ENGINE_CHECK(labels.defined(), what, ": undefined labels tensor");
  ENGINE_CHECK(labels.dtype() == engine::DType::I64, what,
               ": labels must be integers (i64, i32 or u8 in .npy), got ",
               engine::dtype_name(labels.dtype()));
  ENGINE_CHECK(labels.dim() == 1, what, ": labels must be 1-D [N], got shape ",
               engine::shape_str(labels.shape()));
  ENGINE_CHECK(labels.size(0) == expected_count, what, ": ", labels.size(0), " labels for ",
               expected_count, " embeddings");
  return labels.to(engine::Device::cpu()).to_indices();
}

LabelGroups group_by_label(const std::vector<int64_t>& labels) {
  LabelGroups g;
  g.classes = labels;
  std::sort(g.classes.begin(), g.classes.end());
  g.classes.erase(std::unique(g.classes.begin(), g.classes.end()), g.classes.end());
  g.members.resize(g.classes.size());
  g.class_of.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto it = std::lower_bound(g.classes.begin(), g.classes.end(), labels[i]);
    const int64_t c = it - g.classes.begin();
    g.class_of[i] = c;
    g.members[c].push_back(static_cast<int64_t>(i));
  }
  return g;
}

}  // namespace metrics
