// The one translation unit that holds Catch2's main(). Listing tests (CTest discovery) must never
// touch the CUDA runtime, so nothing here does.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
