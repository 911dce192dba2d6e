// CUDA-tagged tests start with REQUIRE_CUDA_OR_SKIP(): without a usable GPU the test prints
// "skipped: no CUDA device" and returns; CTest turns that line into a visible "Skipped"
// (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt).
#pragma once

#include <catch2/catch.hpp>

#include "engine/device.h"

#define REQUIRE_CUDA_OR_SKIP()                \
  do {                                        \
    if (::engine::cuda_device_count() == 0) { \
      WARN("skipped: no CUDA device");        \
      return;                                 \
    }                                         \
  } while (0)
