// copy_strided (the gather behind Tensor::contiguous) and copy_into_strided (the scatter behind
// Tensor::copy_ into a view): hand-computed CPU cases, then CUDA against the CPU over views of
// odd shapes -- transposes, stepped and offset slices, broadcasts, 1 to 4 dimensions. A copy does
// no arithmetic, so CUDA must give the CPU's bits, and a scatter must leave every element outside
// its view as it was.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/copy/copy.h"
#include "tests/support/cuda_guard.h"

using namespace engine;

namespace {

// A view of `base` and its name; the same function makes the view on either device.
struct View {
  std::string name;
  std::function<Tensor(const Tensor&)> make;
};

// Views of a base of rank >= 2: the last two dimensions swapped, every other row from the second
// (an offset, stepped view), a transpose of that, and the first two dimensions swapped.
std::vector<View> views_of_rank(int64_t rank) {
  std::vector<View> views = {
      {"transpose(-2, -1)", [rank](const Tensor& t) { return t.transpose(rank - 2, rank - 1); }},
      {"slice(-2, 1, end, 2)",
       [rank](const Tensor& t) { return t.slice(rank - 2, 1, t.size(rank - 2), 2); }},
      {"slice then transpose", [rank](const Tensor& t) {
         return t.slice(rank - 1, 2, t.size(rank - 1), 3).transpose(0, rank - 1);
       }}};
  if (rank >= 3) {
    views.push_back({"transpose(0, 1)", [](const Tensor& t) { return t.transpose(0, 1); }});
  }
  return views;
}

Tensor random_base(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return uniform(shape, -1.0, 1.0, gen, DType::F32);
}

}  // namespace

TEST_CASE("copy: cpu gathers a transposed and a broadcast view by hand", "[copy]") {
  // src is the 2 x 3 row-major [[0, 1, 2], [3, 4, 5]]; its transpose is 3 x 2 with strides (1, 3).
  const std::vector<float> src = {0, 1, 2, 3, 4, 5};
  std::vector<float> dst(6, -1.0f);
  kernels::copy_strided_cpu(src.data(), kernels::StridedLayout{2, {3, 2}, {1, 3}}, dst.data());
  CHECK(dst == std::vector<float>{0, 3, 1, 4, 2, 5});
  // Row 1 broadcast over 3 rows: stride 0 along the first dimension, offset by the caller.
  std::vector<float> broadcast(9, -1.0f);
  kernels::copy_strided_cpu(src.data() + 3, kernels::StridedLayout{2, {3, 3}, {0, 1}},
                            broadcast.data());
  CHECK(broadcast == std::vector<float>{3, 4, 5, 3, 4, 5, 3, 4, 5});
}

TEST_CASE("copy: cpu scatters into a transposed and a stepped view by hand", "[copy]") {
  // dst[i * 1 + j * 3] = src[i * 2 + j] for the 3 x 2 transposed view of a 2 x 3 buffer.
  const std::vector<double> src = {0, 1, 2, 3, 4, 5};
  std::vector<double> dst(6, -1.0);
  kernels::copy_into_strided_cpu(src.data(), dst.data(), kernels::StridedLayout{2, {3, 2}, {1, 3}});
  CHECK(dst == std::vector<double>{0, 2, 4, 1, 3, 5});
  // Every other element of 7: positions 0, 2, 4, 6 written, the odd ones untouched.
  std::vector<double> stepped(7, -1.0);
  kernels::copy_into_strided_cpu(src.data(), stepped.data(), kernels::StridedLayout{1, {4}, {2}});
  CHECK(stepped == std::vector<double>{0, -1, 1, -1, 2, -1, 3});
}

TEST_CASE("copy cuda: gathers views of odd shapes as the cpu does", "[copy][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 1;
  for (const Shape& shape : std::vector<Shape>{
           {5, 7}, {257, 3}, {3, 5, 7}, {2, 3, 5, 7}, {7, 11, 13, 9}, {33, 65, 129}}) {
    const Tensor base = random_base(shape, seed++);
    const Tensor base_cuda = base.to(Device::cuda());
    for (const View& view : views_of_rank(static_cast<int64_t>(shape.size()))) {
      INFO(shape_str(shape) << " " << view.name);
      const Tensor cpu = view.make(base);
      const Tensor cuda = view.make(base_cuda);
      REQUIRE_FALSE(cuda.is_contiguous());
      const Tensor gathered = cuda.contiguous();
      REQUIRE(gathered.device().is_cuda());
      CHECK(gathered.to_vector() == cpu.contiguous().to_vector());
    }
  }
  // A broadcast view (stride 0) of a row: every output row is the source row.
  const Tensor row = random_base({1, 37}, seed++);
  const Tensor expanded = row.to(Device::cuda()).expand({19, 37}).contiguous();
  CHECK(expanded.to_vector() == row.expand({19, 37}).contiguous().to_vector());
}

TEST_CASE("copy cuda: scatters into views of odd shapes as the cpu does", "[copy][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  uint64_t seed = 100;
  for (const Shape& shape : std::vector<Shape>{
           {5, 7}, {257, 3}, {3, 5, 7}, {2, 3, 5, 7}, {7, 11, 13, 9}, {33, 65, 129}}) {
    for (const View& view : views_of_rank(static_cast<int64_t>(shape.size()))) {
      INFO(shape_str(shape) << " " << view.name);
      // The destinations start as a sentinel everywhere; the view's elements get a contiguous
      // random source, and every other element must still hold the sentinel afterwards.
      Tensor cpu_base = Tensor::full(shape, -7.0);
      Tensor cuda_base = Tensor::full(shape, -7.0, DType::F32, Device::cuda());
      Tensor cpu_view = view.make(cpu_base);
      Tensor cuda_view = view.make(cuda_base);
      REQUIRE_FALSE(cuda_view.is_contiguous());
      const Tensor source = random_base(cpu_view.shape(), seed++);
      cpu_view.copy_(source);
      cuda_view.copy_(source.to(Device::cuda()));
      CHECK(cuda_base.to_vector() == cpu_base.to_vector());
      CHECK(cuda_view.contiguous().to_vector() == source.to_vector());
    }
  }
}
