// How the CPU fast paths use Eigen's GEMM so that a result never depends on the machine's number
// of cores or on the cache sizes its CPU reports.
//
// The order in which a GEMM adds the products of one output element is decided by its blocking:
// Eigen cuts the inner dimension into blocks of kc (sized from the L1 cache) and runs different
// register kernels at the edges of its row blocks (sized from L2/L3). Two things would change
// that blocking from one machine to the next:
//   1. Eigen's own threads: a threaded product picks other block sizes for every thread count.
//      The build defines EIGEN_DONT_PARALLELIZE (CMakeLists.txt), so every Eigen product runs on
//      one thread, and the fast paths spread work themselves over pieces whose bounds depend only
//      on the problem's shape (output tiles here, chunks of images in conv2d's wgrad).
//   2. The cache sizes Eigen reads from the CPU (an Intel core with a 48 KiB L1 gets another kc
//      than a Zen 4 core with 32 KiB). use_fixed_gemm_blocking() replaces them by the constants
//      below, once, before the first product. L1 and L2 are what Eigen reads on this project's
//      Zen 4 build host, so its blocking, and its speed, are unchanged there (the L3 value only
//      has to be nonzero for the single-threaded blocking).
// With both, the same binary gives the same bits for any OMP_NUM_THREADS (tested). The GEMMs no
// longer depend on the CPU model either; other code still may (glibc picks FMA variants of exp
// and log at run time), and agreement across CPU models is untested.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>

#ifndef EIGEN_DONT_PARALLELIZE
#error "the CPU fast paths need EIGEN_DONT_PARALLELIZE (set by CMakeLists.txt for engine_core)"
#endif

namespace engine::kernels {

constexpr std::ptrdiff_t kGemmL1CacheBytes = 32 * 1024;
constexpr std::ptrdiff_t kGemmL2CacheBytes = 1024 * 1024;
constexpr std::ptrdiff_t kGemmL3CacheBytes = 32 * 1024 * 1024;

// Call it before every product Eigen blocks. Thread-safe: the first caller sets the sizes and any
// other waits until it has (a function-local static).
inline void use_fixed_gemm_blocking() {
  static const bool fixed = [] {
    Eigen::setCpuCacheSizes(kGemmL1CacheBytes, kGemmL2CacheBytes, kGemmL3CacheBytes);
    return true;
  }();
  (void)fixed;
}

// matmul_fast_cpu cuts C [m, n] into tiles of at most this many rows and columns and runs one
// single-threaded product per tile. On C2F2's six linear-layer products (batch 256, Zen 4) the
// tiles take 0.83-1.08x the time of Eigen's threaded product on 2 threads and 0.98-1.13x that of
// the whole product on 1 (each tile packs its own operand slices): docs/benchmarks/
// 2026-11-25-cpu-thread-independent-zen4-c09e4ed.md. Much smaller tiles lose more to that
// packing; larger ones leave cores idle on machines with more of them.
constexpr int64_t kGemmTileRows = 128;
constexpr int64_t kGemmTileCols = 256;

}  // namespace engine::kernels
