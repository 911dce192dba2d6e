// conv2d's tile widths (kernels/conv2d/conv2d.h, ConvTile): the rule that picks one per pass and
// shape (conv2d_tiles.cpp), worked by hand on C2F2's and ResNet-18's layers; the setting
// ENGINE_CONV_TILE spells; and on CUDA every width of fprop, dgrad and wgrad against the f64 CPU
// reference over shapes whose K, C, N, H are no multiples of 32, 64 or 128, with the same bits as
// the 128-column tile (wgrad: wherever the widths split N P Q into the same number of chunks).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"
#include "kernels/common/float_bits.h"
#include "kernels/conv2d/conv2d.h"
#include "tests/support/cuda_guard.h"
#include "tests/support/tensors.h"
#include "tests/support/tolerance.h"

using engine::Device;
using engine::DType;
using engine::Tensor;
using engine::kernels::Conv2dShape;
using engine::kernels::ConvPass;
using engine::kernels::ConvTile;

namespace {

Conv2dShape conv(int64_t N, int64_t C, int64_t H, int64_t K, int64_t R, int64_t stride, int64_t pad,
                 int64_t dilation = 1) {
  Conv2dShape s;
  s.N = N, s.C = C, s.H = s.W = H, s.K = K, s.R = s.S = R;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  s.dilation_h = s.dilation_w = dilation;
  return s;
}

int pick(ConvPass pass, const Conv2dShape& s) {
  return engine::kernels::conv2d_tile_columns(engine::kernels::conv2d_pick_tile(pass, s, 132));
}

const ConvTile kWidths[] = {ConvTile::Cols128, ConvTile::Cols64, ConvTile::Cols32};

// Elements outside the reduction tolerance of length L at the reference's rms (a count, so the
// planted-bug check below can assert that it is not zero).
int64_t count_outside(const std::vector<double>& actual, const std::vector<double>& expected,
                      int64_t length) {
  double sum = 0.0;
  for (double e : expected) sum += e * e;
  const double rms = std::sqrt(sum / double(std::max<size_t>(expected.size(), 1)));
  const test::Tolerance tol = test::reduction_tolerance(length, std::max(rms, 1e-3));
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    bad += !(std::fabs(actual[i] - expected[i]) <= tol.atol + tol.rtol * std::fabs(expected[i]));
  }
  return bad;
}

// The three passes of one width on CUDA: y (with bias), dx, dw.
struct Outputs {
  std::vector<double> y, dx, dw;
  int64_t wgrad_workspace = 0;
};

struct Inputs {
  Tensor x, w, b, dy;  // on the device
};

Outputs run(const Conv2dShape& s, const Inputs& in, ConvTile tile) {
  namespace k = engine::kernels;
  Outputs out;
  Tensor y = Tensor::empty({s.N, s.K, s.out_h(), s.out_w()}, DType::F32, Device::cuda());
  Tensor dx = Tensor::empty({s.N, s.C, s.H, s.W}, DType::F32, Device::cuda());
  Tensor dw = Tensor::empty({s.K, s.C, s.R, s.S}, DType::F32, Device::cuda());
  k::conv2d_fprop_cuda(s, in.x.data<float>(), in.w.data<float>(), in.b.data<float>(),
                       y.data<float>(), tile);
  k::conv2d_dgrad_cuda(s, in.dy.data<float>(), in.w.data<float>(), dx.data<float>(), tile);
  out.wgrad_workspace = k::conv2d_wgrad_cuda_workspace_size(s, tile);
  Tensor ws = out.wgrad_workspace > 0
                  ? Tensor::empty({out.wgrad_workspace}, DType::F32, Device::cuda())
                  : Tensor();
  k::conv2d_wgrad_cuda(s, in.dy.data<float>(), in.x.data<float>(), dw.data<float>(), nullptr,
                       ws.defined() ? ws.data<float>() : nullptr, tile);
  out.y = y.to_vector();
  out.dx = dx.to_vector();
  out.dw = dw.to_vector();
  return out;
}

// Bit patterns of the f32 values (to_vector widens exactly), for equality that tells -0 from 0.
std::vector<uint32_t> bits(const std::vector<double>& values) {
  std::vector<uint32_t> out;
  for (double v : values) {
    out.push_back(engine::kernels::f32_bits(static_cast<float>(v)));
  }
  return out;
}

// Every width against the f64 reference and the 128 tile's bits; returns the outputs per width.
std::vector<Outputs> require_widths_match(const Conv2dShape& s, uint64_t seed) {
  namespace k = engine::kernels;
  INFO("N=" << s.N << " C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K << " R=" << s.R
            << " stride " << s.stride_h << " pad " << s.pad_h << " dilation " << s.dilation_h);
  const Tensor x = test::random_f32({s.N, s.C, s.H, s.W}, seed);
  const Tensor w = test::random_f32({s.K, s.C, s.R, s.S}, seed + 1);
  const Tensor b = test::random_f32({s.K}, seed + 2);
  const Tensor dy = test::random_f32({s.N, s.K, s.out_h(), s.out_w()}, seed + 3);
  const Tensor x64 = x.to(DType::F64), w64 = w.to(DType::F64), b64 = b.to(DType::F64);
  const Tensor dy64 = dy.to(DType::F64);
  std::vector<double> y_ref(size_t(s.N * s.K * s.out_h() * s.out_w()));
  std::vector<double> dx_ref(size_t(s.N * s.C * s.H * s.W)), dw_ref(size_t(s.K * s.C * s.R * s.S));
  k::conv2d_fprop_cpu<double>(s, x64.data<double>(), w64.data<double>(), b64.data<double>(),
                              y_ref.data());
  k::conv2d_dgrad_cpu<double>(s, dy64.data<double>(), w64.data<double>(), dx_ref.data());
  k::conv2d_wgrad_cpu<double>(s, dy64.data<double>(), x64.data<double>(), dw_ref.data(), nullptr);

  const Inputs in{x.to(Device::cuda()), w.to(Device::cuda()), b.to(Device::cuda()),
                  dy.to(Device::cuda())};
  std::vector<Outputs> outputs;
  for (ConvTile tile : kWidths) {
    INFO("tile columns " << k::conv2d_tile_columns(tile));
    outputs.push_back(run(s, in, tile));
    const Outputs& o = outputs.back();
    CHECK(count_outside(o.y, y_ref, s.C * s.R * s.S) == 0);
    CHECK(count_outside(o.dx, dx_ref, s.K * s.R * s.S) == 0);
    CHECK(count_outside(o.dw, dw_ref, s.N * s.out_h() * s.out_w()) == 0);
    CHECK(bits(o.y) == bits(outputs[0].y));
    CHECK(bits(o.dx) == bits(outputs[0].dx));
    // The workspace is splits x K C R S floats: equal sizes, equal chunks, equal sums.
    if (o.wgrad_workspace == outputs[0].wgrad_workspace) CHECK(bits(o.dw) == bits(outputs[0].dw));
  }
  // Auto runs one of the widths, so it too gives the 128 tile's bits for fprop and dgrad.
  const Outputs automatic = run(s, in, ConvTile::Auto);
  CHECK(bits(automatic.y) == bits(outputs[0].y));
  CHECK(bits(automatic.dx) == bits(outputs[0].dx));
  return outputs;
}

}  // namespace

TEST_CASE("conv2d tiles: the rule's picks for C2F2 and ResNet-18, worked by hand", "[conv2d]") {
  // Cost per width T (conv2d_tiles.cpp): block cost 1 (128), 0.75 (64), 0.625 (32) per step,
  // times max(1, blocks / 264) on 132 SMs.
  const Conv2dShape conv1 = conv(256, 1, 28, 32, 5, 1, 2), conv2 = conv(256, 32, 14, 64, 5, 1, 2);
  // conv1 fprop: 1568 row tiles, K = 32 one column tile at every width: 5.94 x {1, .75, .625}.
  CHECK(pick(ConvPass::Fprop, conv1) == 32);
  // conv2 fprop: 392 row tiles; 128 and 64 launch 392 blocks (1.48 x {1, .75}), 32 launches 784
  // (2.97 x .625 = 1.86): 64.
  CHECK(pick(ConvPass::Fprop, conv2) == 64);
  // conv2 dgrad, C = 32: 392 blocks at every width: 32.
  CHECK(pick(ConvPass::Dgrad, conv2) == 32);
  // conv1 wgrad: one tile at every width, 64 chunks of 3136: 32.
  CHECK(pick(ConvPass::Wgrad, conv1) == 32);
  // conv2 wgrad: 7 row tiles; 128 and 64: 38 chunks of 1328 (266 blocks); 32: 14 tiles, 19
  // chunks of 2648: 1328 x 1.008 x {1, .75} against 2648 x 1.008 x .625: 64.
  CHECK(pick(ConvPass::Wgrad, conv2) == 64);
  // ResNet-18 layer3 conv at batch 112 (C = K = 256, 14 x 14): 172 row tiles; 344 blocks at 128
  // (1.30), 688 at 64 (2.61 x .75), 1376 at 32 (5.21 x .625): 128.
  CHECK(pick(ConvPass::Fprop, conv(112, 256, 14, 256, 3, 1, 1)) == 128);
  // layer4 at batch 2 (K = 512, 7 x 7): one row tile, 4 / 8 / 16 blocks, far from 264: the
  // narrowest, cheapest block wins.
  CHECK(pick(ConvPass::Fprop, conv(2, 512, 7, 512, 3, 1, 1)) == 32);
}

TEST_CASE("conv2d tiles: widths and the ENGINE_CONV_TILE spelling", "[conv2d][backend]") {
  CHECK(engine::kernels::conv2d_tile_columns(ConvTile::Cols128) == 128);
  CHECK(engine::kernels::conv2d_tile_columns(ConvTile::Cols64) == 64);
  CHECK(engine::kernels::conv2d_tile_columns(ConvTile::Cols32) == 32);
  CHECK_THROWS_WITH(engine::kernels::conv2d_tile_columns(ConvTile::Auto), Catch::Contains("Auto"));
  for (ConvTile tile : {ConvTile::Auto, ConvTile::Cols128, ConvTile::Cols64, ConvTile::Cols32}) {
    CHECK(engine::parse_conv_tile(engine::conv_tile_name(tile)) == tile);
  }
  CHECK(std::string(engine::conv_tile_name(ConvTile::Cols64)) == "64");
  CHECK_THROWS_WITH(engine::parse_conv_tile("16", "ENGINE_CONV_TILE"),
                    Catch::Contains("ENGINE_CONV_TILE") && Catch::Contains("'16'") &&
                        Catch::Contains("'auto', '128', '64' or '32'"));
  const ConvTile before = engine::conv_tile();
  engine::set_conv_tile(ConvTile::Cols32);
  CHECK(engine::conv_tile() == ConvTile::Cols32);
  engine::set_conv_tile(before);
}

TEST_CASE("conv2d cuda tiles: every width against the reference, same bits as 128",
          "[conv2d][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 2000;
  // K, C, N, H off the tile sizes; strides 1 and 2; padding 0 to 2; dilation 2 once.
  for (const Conv2dShape& s :
       {conv(2, 5, 11, 37, 3, 1, 1), conv(3, 33, 9, 70, 5, 2, 2), conv(1, 67, 7, 130, 3, 2, 0),
        conv(2, 6, 10, 9, 3, 1, 2, 2), conv(1, 32, 14, 64, 5, 1, 2), conv(3, 7, 13, 33, 1, 2, 0)}) {
    require_widths_match(s, seed);
    seed += 10;
  }
}

TEST_CASE("conv2d cuda tiles: wgrad split-K with the widths' own chunk counts", "[conv2d][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // 1 x 1 filters on one 128 x 128 channel, 2 images: N P Q = 32768 reduction indices, C R S = 1
  // row tile; K = 250 is 2 column tiles at 128, 4 at 64, 8 at 32. split_k.h on 132 SMs (the
  // emulator's count): 264 / 2 and 264 / 4 blocks wanted, capped at 64 chunks of 512, for 128 and
  // 64 (same bits); 264 / 8 = 33 chunks of 1000 for 32 (only the tolerance, checked inside).
  const std::vector<Outputs> o = require_widths_match(conv(2, 1, 128, 250, 1, 1, 0), 2100);
  CHECK(o[0].wgrad_workspace == 64 * 250);
  CHECK(o[1].wgrad_workspace == 64 * 250);
  CHECK(o[2].wgrad_workspace == 33 * 250);
}

TEST_CASE("conv2d cuda tiles: the checks catch a wrong column offset", "[conv2d][cuda]") {
  // The checks above, shown to fail on outputs that a tile with a wrong column offset would
  // write: the 32-wide fprop's output with each output channel k >= 32 taken from channel k - 32
  // (a column block that forgot its n0), and one value one ulp off (bits, not tolerance).
  REQUIRE_CUDA_OR_SKIP();
  const Conv2dShape s = conv(2, 5, 11, 37, 3, 1, 1);
  const std::vector<Outputs> o = require_widths_match(s, 2200);
  const Outputs& narrow = o[2];
  std::vector<double> wrong = narrow.y;
  const int64_t PQ = s.out_h() * s.out_w();
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t k = 32; k < s.K; ++k) {
      for (int64_t i = 0; i < PQ; ++i)
        wrong[(n * s.K + k) * PQ + i] = narrow.y[(n * s.K + k - 32) * PQ + i];
    }
  }
  CHECK(count_outside(wrong, o[0].y, s.C * s.R * s.S) > 0);
  std::vector<double> ulp = narrow.y;
  ulp[5] = std::nextafter(static_cast<float>(ulp[5]), 1e30f);
  CHECK(bits(ulp) != bits(o[0].y));
}
