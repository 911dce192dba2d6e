// The three distance metrics of the papers (docs/config.md, Losses; robrank losses/miner.py and
// losses/*.py), one enum for every layer: the fused triplet kernels (kernels/triplet), the losses
// and miners (losses/distance.h: what each metric computes) and evaluation (metrics/distance.h).
//
//   N  L2-normalize each embedding, then Euclidean distance (the papers' default)
//   E  Euclidean distance on the raw embeddings
//   C  cosine distance 1 - cos(x, y) (scale invariant, so normalizing first changes nothing)
#pragma once

#include <string>

namespace engine::kernels {

enum class Metric { N, E, C };

// "N", "E" or "C" (also lower case); anything else throws engine::Error naming the text.
Metric parse_metric(const std::string& name);
const char* metric_name(Metric metric);  // "N", "E", "C"

}  // namespace engine::kernels
