#!/usr/bin/env bash
# The [cuda] tests on the CUDA emulator under its race checker: a CPU stand-in for
# compute-sanitizer's racecheck (tests/support/cuda_emulator/racecheck.h says what it models and
# misses).
# The translated kernels are compiled with ThreadSanitizer, every emulated thread is a fiber, and
# only CUDA's own orderings (launches, __syncthreads, warp barriers, atomics) order their
# accesses, so a race is reported whichever order the emulator happened to run the threads in --
# in shared memory, and in device memory between threads and between blocks. First it checks
# that it finds the two races planted in tests/emulator/sample_kernels.cu.
#   tools/cuda_emulator_racecheck.sh [ctest args...]     e.g. -R losses.emulated
# Builds in build-racecheck/ (ENGINE_CUDA=OFF: nvcc is not needed; g++'s ThreadSanitizer runtime,
# libtsan2, comes with g++). docs/testing.md has the details.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-racecheck}"
source "$ROOT/scripts/setup.sh"
# ENGINE_TEST_TIMEOUT_SCALE: the end-to-end tests' time limits are for the normal build.
build_emulated_test_programs "kernels under ThreadSanitizer" -DENGINE_EMULATOR_RACECHECK=ON \
  -DENGINE_TEST_TIMEOUT_SCALE=10
jobs="$(nproc 2>/dev/null || echo 2)"
# halt_on_error=0: every race of a test is reported (the test still fails, exit code 66).
# history_size=4: enough access history to show both stacks of a race in long kernels.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0:history_size=4}"
# The CPU references' OpenMP loops run in one thread: libgomp is not built with ThreadSanitizer,
# so its own synchronization is invisible and its worker threads would be reported racing with
# the main thread over every tensor they fill.
export OMP_NUM_THREADS=1
echo "==> the race checker finds the planted races"
ctest --output-on-failure -L racecheck
echo "==> the emulator's own tests and the emulated [cuda] tests, race-checked"
# (Not the emulator case that runs a planted race to show it computes the right answer.)
ctest --output-on-failure -j "$jobs" -R "emulated|^emulator\\." -L "emulated|cpu" \
  -E "a racy and a race-free" "$@"
