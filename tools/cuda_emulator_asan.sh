#!/usr/bin/env bash
# The [cuda] tests on the CUDA emulator under AddressSanitizer and UBSan: a CPU stand-in for
# compute-sanitizer's memcheck. Device memory is host memory here, so a kernel that reads or
# writes past an allocation (or shared array), or overflows an index, is reported with the .cu
# file and line. Slower than ./test.sh's `emulated` run (about 3x), so not part of it.
#   tools/cuda_emulator_asan.sh [ctest args...]     e.g. -R ops.emulated.conv2d
# Builds in build-asan/ (ENGINE_CUDA=OFF: nvcc is not needed); docs/testing.md explains the
# emulator and what it cannot see.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-asan}"
source "$ROOT/scripts/setup.sh"
# -Wno-error=maybe-uninitialized: GCC 12 with -fsanitize=address reports a false "may be used
# uninitialized" inside libstdc++'s own <regex> (std::function in _NFA::_M_insert_*, included by
# tests/emulator/emulator_test.cpp since its launch-resource tests); it stays a warning here and an
# error in the normal build, as in tools/cpu_asan.sh.
# ENGINE_TEST_TIMEOUT_SCALE: the end-to-end tests' time limits are for the normal build (the
# emulated `dml train` runs take 5 to 10 times longer here).
build_emulated_test_programs "with AddressSanitizer and UBSan" -DENGINE_TEST_TIMEOUT_SCALE=10 \
  -DCMAKE_CXX_FLAGS="$ASAN_UBSAN_CXX_FLAGS -Wno-error=maybe-uninitialized"
jobs="$(nproc 2>/dev/null || echo 2)"
# The fibers' stacks are switched with the sanitizer's fiber annotations
# (tests/support/cuda_emulator/scheduler.cpp);
# leaks are not kernel bugs (the caching allocator keeps blocks on purpose).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
ctest --output-on-failure -j "$jobs" -L "emulated|cpu" -R "emulated|^emulator\." "$@"
