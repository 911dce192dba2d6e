// AdvProp-D / MDProp (the recipe's math: mdprop.cpp): the target choice, exposed for tests.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/random.h"

namespace attacks::defenses {

// For each of the n = labels.size() images, `count` row indices of images with another label
// (row-major [n * count]): uniform without replacement among them when there are at least
// `count`, with replacement when there are fewer, and among all other rows when every image
// shares the label (the image itself only when n = 1). Draws exactly n * count uniforms from
// `gen`.
std::vector<int64_t> mdprop_pick_targets(const std::vector<int64_t>& labels, int64_t count,
                                         engine::Generator& gen);

}  // namespace attacks::defenses
