// Which block-tile width conv2d's implicit GEMMs use (contract in conv2d.h): the rule from
// counts, and wgrad's split of its reduction, in plain C++ so the tests check them without a GPU.
//
// The rule. No GPU was at hand to measure the three widths, so the choice is a cost model from
// counts, made per pass and shape; `dml bench` times every width on C2F2's layers
// ("conv c2f2.conv2 fprop tile64", ...) and ENGINE_CONV_TILE=128|64|32 forces one, so a GPU
// session can check the model in one call. For a width of T columns (c = T / 16 per thread):
//  - columns wasted: a GEMM with Ncols columns runs ceil(Ncols / T) tiles of T, so for Ncols = 32
//    a 128-wide tile does 4x the useful multiply-adds. The model charges the whole tile.
//  - shared-memory traffic: per k a thread reads 8 + c floats from shared memory for 8 c FMAs.
//    An SM issues 128 FP32 FMAs but reads 32 floats (128 bytes) of shared memory per clock, so a
//    tile needs 4 FMAs per float read to be FMA-bound: 128 columns (c = 8) has exactly 4, 64
//    columns (c = 4) 2.67 and runs at most at 4 / 2.67 = 1.5x its FMA time, 32 columns (c = 2)
//    1.6, 2.5x. So a block's time ~ its FMAs x max(1, 4 (8 + c) / (8 c)): per reduction step,
//    relative to a 128-wide block, 0.75 for 64 columns and 0.625 for 32.
//  - filling the GPU: two blocks per SM are resident (__launch_bounds__(256, 2)); with B blocks
//    and 2 SMs' worth of slots, the launch takes ~ max(1, B / (2 SMs)) block times. Narrow tiles
//    launch more blocks, which helps only while the wide tile's blocks leave SMs idle (a small
//    batch, or fc-like shapes with few output tiles).
// time(T) = block time(T) x max(1, blocks(T) / (2 SMs)); the smallest wins, ties to the wider
// tile (fewer blocks, less redundant A traffic). wgrad's blocks and block length come from its
// split for that width (more column tiles, fewer chunks). Worked for C2F2 at 256 images on 132
// SMs (conv2d_cuda.cu's header has the useful fractions): fprop conv1 (K = 32) -> 32, conv2
// (K = 64) -> 64; dgrad conv2 (C = 32) -> 32; wgrad conv1 -> 32, conv2 -> 64. ResNet-18's
// layers at batch 112 keep 128 (K, C >= 64 and hundreds of blocks) except where K or C is 64.
#include "kernels/conv2d/conv2d_tiles.h"

#include <algorithm>

#include "kernels/common/check.h"

namespace engine::kernels {

namespace {

int64_t tiles_of(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

// A block's time per reduction step relative to the FMAs of a 128 x 128 tile (above).
double block_step_cost(int columns) {
  const int c = columns / 16;
  const double shared_bound = std::max(1.0, 4.0 * (8 + c) / (8.0 * c));
  return double(columns) / 128.0 * shared_bound;
}

// The GEMM each pass runs: rows (M, over all dgrad phases' grid slices) and columns.
struct GemmSize {
  int64_t row_tiles = 0, columns = 0;
};

GemmSize gemm_size(ConvPass pass, const Conv2dShape& s) {
  using conv2d_detail::kTileRows;
  switch (pass) {
    case ConvPass::Fprop:
      return {tiles_of(s.N * s.out_h() * s.out_w(), kTileRows), s.K};
    case ConvPass::Dgrad: {  // one grid slice per stride phase, sized for phase (0, 0)
      const int64_t rows = s.N * tiles_of(s.H, s.stride_h) * tiles_of(s.W, s.stride_w);
      return {tiles_of(rows, kTileRows) * s.stride_h * s.stride_w, s.C};
    }
    case ConvPass::Wgrad:
      return {tiles_of(s.C * s.R * s.S, kTileRows), s.K};
  }
  return {};
}

}  // namespace

int conv2d_tile_columns(ConvTile tile) {
  switch (tile) {
    case ConvTile::Cols128:
      return 128;
    case ConvTile::Cols64:
      return 64;
    case ConvTile::Cols32:
      return 32;
    case ConvTile::Auto:
      break;
  }
  fail("conv2d_tile_columns: ConvTile::Auto has no width; resolve it with conv2d_pick_tile");
}

ConvTile conv2d_pick_tile(ConvPass pass, const Conv2dShape& shape, int multiprocessors) {
  const GemmSize gemm = gemm_size(pass, shape);
  const double slots = 2.0 * std::max(multiprocessors, 1);
  ConvTile best = ConvTile::Cols128;
  double best_time = 0.0;
  for (ConvTile tile : {ConvTile::Cols128, ConvTile::Cols64, ConvTile::Cols32}) {
    const int columns = conv2d_tile_columns(tile);
    double blocks = double(gemm.row_tiles * tiles_of(gemm.columns, columns));
    double steps = 1.0;  // fprop and dgrad: every width walks the same reduction per block
    if (pass == ConvPass::Wgrad) {
      const SplitK split = conv2d_detail::wgrad_split(shape, columns, multiprocessors);
      blocks *= split.splits;
      steps = double(split.chunk);
    }
    const double time = block_step_cost(columns) * steps * std::max(1.0, blocks / slots);
    if (tile == ConvTile::Cols128 || time < best_time) {
      best = tile;
      best_time = time;
    }
  }
  return best;
}

SplitK conv2d_detail::wgrad_split(const Conv2dShape& s, int columns, int multiprocessors) {
  const int64_t tiles = tiles_of(s.C * s.R * s.S, kTileRows) * tiles_of(s.K, columns);
  return choose_split_k(s.N * s.out_h() * s.out_w(), tiles, kTileStep, multiprocessors);
}

}  // namespace engine::kernels
