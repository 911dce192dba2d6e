// engine::CudaGraph (engine/cuda_graph.h) and the allocator's graph pools (engine/allocator.h):
// a captured step runs only when replayed, replays allocate nothing, a refused call inside the
// step is an error, and the graph's blocks are never handed to anyone else while it lives. On the
// CUDA emulator here (engine.emulated.*), on a GPU as engine.*. Expected values by hand.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/allocator.h"
#include "engine/backend.h"
#include "engine/cuda_graph.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/common/cuda_runtime.h"
#include "kernels/common/device_counters.h"
#include "tests/support/cuda_guard.h"

using engine::AllocatorStats;
using engine::CudaGraph;
using engine::Device;
using engine::DType;
using engine::Tensor;

namespace {

// out = x * 2 + 1, through a temporary the step allocates.
// cudaMalloc calls so far, counted once by the engine's instruments.
int64_t device_mallocs() { return engine::kernels::device_counters().device_allocations; }

void affine_step(const Tensor& x, Tensor& out) { out.copy_(x * 2.0 + 1.0); }

}  // namespace

TEST_CASE("cuda graph: a captured step runs at each replay, and a replay allocates nothing",
          "[cuda_graph][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {4}).to(Device::cuda());
  Tensor out = Tensor::zeros({4}, DType::F32, Device::cuda());
  affine_step(x, out);  // the warm-up: the cache now holds the temporaries' block sizes
  out.fill_(0.0);
  const int64_t mallocs_before_capture = device_mallocs();
  CudaGraph graph([&] {
    affine_step(x, out);
    x.copy_(out);  // the next replay starts from this one's result
  });
  CHECK(device_mallocs() == mallocs_before_capture);
  CHECK(out.to_vector() == std::vector<double>{0, 0, 0, 0});  // captured, not run
  CHECK(x.to_vector() == std::vector<double>{1, 2, 3, 4});

  const AllocatorStats before_replays = engine::allocator_stats(Device::cuda());
  const int64_t mallocs_before_replays = device_mallocs();
  graph.replay();
  CHECK(x.to_vector() == std::vector<double>{3, 5, 7, 9});  // 2x + 1
  graph.replay();
  graph.replay();
  // x -> 2x + 1 twice more: 3 -> 7 -> 15, 5 -> 11 -> 23, 7 -> 15 -> 31, 9 -> 19 -> 39.
  CHECK(x.to_vector() == std::vector<double>{15, 23, 31, 39});
  const AllocatorStats after_replays = engine::allocator_stats(Device::cuda());
  CHECK(after_replays.allocations == before_replays.allocations);
  CHECK(device_mallocs() == mallocs_before_replays);
}

TEST_CASE("cuda graph: a host synchronization inside the captured step is an error",
          "[cuda_graph][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  Tensor x = Tensor::from_vector({1, 2}, {2}).to(Device::cuda());
  Tensor out = Tensor::zeros({2}, DType::F32, Device::cuda());
  affine_step(x, out);
  void* const stream_before = engine::kernels::cuda_current_stream();
  // item() copies to the host and waits for the device: a capture refuses both.
  REQUIRE_THROWS_WITH(CudaGraph([&] {
                        affine_step(x, out);
                        if (engine::sum(out).item() > 0.0) out.fill_(0.0);
                      }),
                      Catch::Contains("capturing"));
  // Nothing of the capture is left: the thread's stream is back, eager work runs as before.
  CHECK(engine::kernels::cuda_current_stream() == stream_before);
  affine_step(x, out);
  CHECK(out.to_vector() == std::vector<double>{3, 5});
  // A step that throws by itself leaves nothing either.
  REQUIRE_THROWS_WITH(CudaGraph([] { engine::fail("planted"); }), Catch::Contains("planted"));
  CHECK(engine::kernels::cuda_current_stream() == stream_before);
}

TEST_CASE("cuda graph: a capture never calls cudaMalloc: a size the cache lacks is an error",
          "[cuda_graph][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // 12345 floats (49380 bytes, a 49664-byte block): no other test here asks for this size.
  Tensor x = Tensor::zeros({12345}, DType::F32, Device::cuda());
  // x + 1 needs a second block of that size, and the cache has none: not warmed up.
  REQUIRE_THROWS_WITH(CudaGraph([&] { x.copy_(x + 1.0); }),
                      Catch::Contains("run the captured step once, eagerly"));
}

TEST_CASE("cuda graph: the blocks a graph uses are its own until it is destroyed",
          "[cuda_graph][cuda]") {
  REQUIRE_CUDA_OR_SKIP();
  // 23456 floats: a block size no other test here uses.
  Tensor x = Tensor::ones({23456}, DType::F32, Device::cuda());
  Tensor out = Tensor::zeros({23456}, DType::F32, Device::cuda());
  affine_step(x, out);  // warm-up: the cache holds the temporaries' blocks
  void* temporary = nullptr;
  {
    CudaGraph graph([&] {
      Tensor doubled = x * 2.0;
      temporary = doubled.raw_data();
      out.copy_(doubled + 1.0);
    });
    // The temporary was freed at the end of the step, into the graph's pool: a tensor of that
    // size made now must not get it (the graph writes it at every replay).
    Tensor other = Tensor::empty({23456}, DType::F32, Device::cuda());
    CHECK(other.raw_data() != temporary);
    graph.replay();
    CHECK(out.to_vector() == std::vector<double>(23456, 3.0));
  }
  // The graph is gone: its blocks are the cache's again.
  Tensor again = Tensor::empty({23456}, DType::F32, Device::cuda());
  Tensor and_again = Tensor::empty({23456}, DType::F32, Device::cuda());
  CHECK((again.raw_data() == temporary || and_again.raw_data() == temporary));
}

TEST_CASE("attack loop: ENGINE_ATTACK_LOOP's spellings", "[cuda_graph]") {
  CHECK(engine::parse_attack_loop("eager") == engine::AttackLoop::Eager);
  CHECK(engine::parse_attack_loop("captured") == engine::AttackLoop::Captured);
  CHECK(std::string(engine::attack_loop_name(engine::AttackLoop::Captured)) == "captured");
  REQUIRE_THROWS_WITH(engine::parse_attack_loop("graph", "ENGINE_ATTACK_LOOP"),
                      Catch::Contains("ENGINE_ATTACK_LOOP") && Catch::Contains("'graph'"));
}
