// AdvProp-D / MDProp (the recipe's math: mdprop.cpp): the target choice, exposed for tests.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/random.h"

namespace attacks::defenses {

// For each of the n = labels.size() images, `count` row indices of the batch (row-major
// [n * count]) whose labels differ from the image's and from each other (MDProp eq. 3, j != l):
// the evaluation MTAX's rule, attacks::select_feature_targets with the batch as the gallery
// (classes reused only when fewer than `count` other classes exist). Throws engine::Error when an
// image has no other class in the batch. Draws exactly n * count uniforms from `gen`.
std::vector<int64_t> mdprop_pick_targets(const std::vector<int64_t>& labels, int64_t count,
                                         engine::Generator& gen);

}  // namespace attacks::defenses
