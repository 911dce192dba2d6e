// Sets the process-wide conv or GEMM backend (engine/backend.h) for one scope of a test and
// restores both backends when the scope ends, also when a REQUIRE fails, so the next test starts
// from the defaults.
#pragma once

#include "engine/backend.h"

namespace test {

class BackendScope {
 public:
  explicit BackendScope(engine::ConvBackend conv) : BackendScope() {
    engine::set_conv_backend(conv);
  }
  explicit BackendScope(engine::GemmBackend gemm) : BackendScope() {
    engine::set_gemm_backend(gemm);
  }
  ~BackendScope() {
    engine::set_conv_backend(conv_);
    engine::set_gemm_backend(gemm_);
  }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  BackendScope() : conv_(engine::conv_backend()), gemm_(engine::gemm_backend()) {}

  engine::ConvBackend conv_;
  engine::GemmBackend gemm_;
};

// Sets engine::fused_kernels() for one scope and restores it when the scope ends.
class FusedKernelsScope {
 public:
  explicit FusedKernelsScope(bool on) : previous_(engine::fused_kernels()) {
    engine::set_fused_kernels(on);
  }
  ~FusedKernelsScope() { engine::set_fused_kernels(previous_); }
  FusedKernelsScope(const FusedKernelsScope&) = delete;
  FusedKernelsScope& operator=(const FusedKernelsScope&) = delete;

 private:
  bool previous_;
};

}  // namespace test
