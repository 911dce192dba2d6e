// Reductions over per-row subsets, built from engine ops so autograd differentiates them. The
// DML losses that sum over "the positives of anchor i" or "the active hinge terms" use these
// instead of a per-anchor loop of tiny ops: the subsets are decided on the host (labels,
// mining), the arithmetic stays one dense [R, C] computation.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace losses::detail {

// out[r] = log(1 + sum_{c : member[r*C + c]} exp(z[r, c])) for z [R, C]; member has R*C entries
// (nonzero = in the set). An empty set gives log 1 = 0. Computed as logsumexp over the row
// [0, z_r + bias_r] with bias 0 for members and -inf otherwise: stable for large z, and
// non-members get exactly zero gradient (softmax weight exp(-inf) = 0).
engine::Tensor log1p_sum_exp(const engine::Tensor& z, const std::vector<uint8_t>& member);

// Mean of the strictly positive entries of a hinge vector h = relu(...) [T] (PyTorch's
// h[h > 0].mean()), and 0 when none is positive instead of NaN (robrank's NaN -> 0). The count
// is piecewise constant, so its derivative is 0 and dividing by it is the exact gradient.
engine::Tensor active_mean(const engine::Tensor& hinge);

// Euclidean norm of each row of x [B, D] -> [B], with a zero (not NaN) gradient for a zero row.
engine::Tensor row_norms(const engine::Tensor& x);

}  // namespace losses::detail
