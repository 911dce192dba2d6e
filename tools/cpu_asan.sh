#!/usr/bin/env bash
# The whole CPU test suite (label `cpu`) under AddressSanitizer, LeakSanitizer and UBSan: every
# CPU kernel, op, model, loss, attack, reader and `dml` subcommand that the tests reach, checked
# for out-of-bounds accesses, use after free, leaks and undefined behaviour (signed overflow,
# misaligned or null accesses, bad shifts, out-of-range float-to-int casts). UB is fatal, so a
# report fails its test. Slower than ./test.sh (about 3x), so not part of it; the [cuda] tests on
# the emulator have their own script, tools/cuda_emulator_asan.sh.
#   tools/cpu_asan.sh [ctest args...]     e.g. -R ops.conv2d
# Builds in build-cpu-asan/ (ENGINE_CUDA=OFF: nvcc is not needed). docs/testing.md has the
# results of its runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-cpu-asan}"
source "$ROOT/scripts/setup.sh"
# Every test program but the emulated ones (their own script), and the programs the tests run.
# ENGINE_TEST_TIMEOUT_SCALE: the end-to-end tests' time limits are for the normal build.
# -Wno-error=maybe-uninitialized: GCC 12 with -fsanitize=address reports a false "may be used
# uninitialized" inside libstdc++'s own <regex> (std::function in _NFA::_M_insert_*, included by
# tests/tools/report_test.cpp); it stays a warning here and an error in the normal build.
build_test_programs_without_cuda _test "dml mlp_demo" "with AddressSanitizer and UBSan" \
  -DENGINE_TEST_TIMEOUT_SCALE=10 \
  -DCMAKE_CXX_FLAGS="$ASAN_UBSAN_CXX_FLAGS -Wno-error=maybe-uninitialized"
jobs="$(nproc 2>/dev/null || echo 2)"
# Leaks are reported (a CPU path has no cache that keeps memory on purpose); the log says which
# allocation leaked. print_stacktrace: UBSan names the call chain, not only the line.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
ctest --output-on-failure -j "$jobs" -L cpu -LE "emulated|racecheck" "$@"
