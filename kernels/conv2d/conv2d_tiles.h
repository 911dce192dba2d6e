// What conv2d_cuda.cu and the tile rule (conv2d_tiles.cpp) share about the implicit GEMMs' block
// tiles: plain C++, internal to kernels/conv2d (the contracts are in conv2d.h).
#pragma once

#include <cstdint>

#include "kernels/common/split_k.h"
#include "kernels/conv2d/conv2d.h"

namespace engine::kernels::conv2d_detail {

constexpr int kTileRows = 128;  // the M side of every variant (gemm_tile.cuh's kTileM)
constexpr int kTileStep = 8;    // the reduction step (gemm_tile.cuh's kTileK)

// wgrad's GEMM is dW[c r s, k] (rows C R S, columns K) and cuts its N P Q reduction into chunks
// (split_k.h) according to how many tiles of `columns` columns its output has.
SplitK wgrad_split(const Conv2dShape& shape, int columns, int multiprocessors);

}  // namespace engine::kernels::conv2d_detail
