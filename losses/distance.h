// The three distance metrics of the papers (N, E, C: kernels/common/metric.h) on top of engine
// ops, and the checks every SPC-2 loss and miner shares.
//
// Two ways to measure, because robrank uses two:
//   * row_distance(a, b): one distance per row pair, as the losses compute it. For N and E it is
//     PyTorch's pairwise_distance ||a - b + 1e-6||, the 1e-6 keeping the norm (and its gradient)
//     away from 0 for identical rows; for C it is 1 - <a/|a|, b/|b|>.
//   * distance_matrix(x, y): every row against every row (engine::pairwise_distance). The squared
//     distance is summed from differences, so identical rows give an exact 0 and a zero (not NaN)
//     gradient. robrank's miners use the Gram trick sqrt(|x|^2 + |y|^2 - 2<x, y>) instead, which
//     can cancel below 0 and return NaN on the diagonal; we do not.
//
// An SPC-2 batch (robrank datasets/mnist.py) holds B = 2P embeddings laid out [a0, p0, a1, p1, ...]
// with labels [y0, y0, y1, y1, ...]: anchors at even rows, each anchor's partner right after it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "kernels/common/metric.h"

namespace losses {

// The metric and its names are the kernels' (kernels/common/metric.h).
using engine::kernels::Metric;
using engine::kernels::metric_name;
using engine::kernels::parse_metric;

// The triplet margin of the papers: 0.2 for N and C, 1.0 for E.
double default_margin(Metric metric);

// The embeddings as `metric` compares them: rows L2-normalized for N and C, unchanged for E.
// Differentiable.
engine::Tensor embed_for_metric(const engine::Tensor& x, Metric metric);

// One distance per row: a [T, D], b [T, D] -> [T] (see the header comment). The caller applies
// embed_for_metric first for N. Differentiable.
engine::Tensor row_distance(const engine::Tensor& a, const engine::Tensor& b, Metric metric);

// All pairs: x [N, D], y [M, D] -> [N, M], Euclidean for N and E, cosine distance for C. The
// caller applies embed_for_metric first for N. Differentiable; exact zeros and zero gradients
// for identical rows.
engine::Tensor distance_matrix(const engine::Tensor& x, const engine::Tensor& y, Metric metric);

// The B x B distance matrix miners work on, row-major on the host in f64: computed under
// NoGradGuard from detached embeddings (after embed_for_metric) with distance_matrix, so the
// diagonal is an exact 0 for N and E (for C, 1 - cos rounds to within 1e-15 of 0; every miner
// treats the diagonal as a same-label entry, so no pick depends on it) and no entry is NaN for
// finite input.
std::vector<double> mining_distances(const engine::Tensor& embeddings, Metric metric);

// Validates an SPC-2 batch for `op` and returns its labels on the host: embeddings floating-point
// [B, D] with B even and B >= 2, labels I64 [B] on any device, labels[2i] == labels[2i + 1].
std::vector<int64_t> check_spc2_batch(const engine::Tensor& embeddings,
                                      const engine::Tensor& labels, const char* op);

// Validates embeddings [B, D] and labels I64 [B] (any batch layout) and returns the labels.
std::vector<int64_t> check_labeled_batch(const engine::Tensor& embeddings,
                                         const engine::Tensor& labels, const char* op);

}  // namespace losses
