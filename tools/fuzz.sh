#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a while (SPEC §13).
#   tools/fuzz.sh [seconds per target, default 60]
# Crashing inputs are written to build-fuzz/crashes/<target>/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
BUILD="$ROOT/build-fuzz"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DENGINE_CUDA=OFF -DENGINE_FUZZ=ON \
  -DENGINE_BUILD_TESTS=OFF -DENGINE_WERROR=OFF -DENGINE_CPU_AVX2=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
status=0
for target in fuzz_safetensors fuzz_npy fuzz_idx fuzz_mat; do
  cmake --build "$BUILD" -j "$(nproc)" --target "$target"
  mkdir -p "$BUILD/crashes/$target" "$BUILD/corpus/$target"
  echo "==> $target for ${SECONDS_PER_TARGET}s"
  "$BUILD/tests/fuzz/$target" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 \
    -artifact_prefix="$BUILD/crashes/$target/" "$BUILD/corpus/$target" || status=1
done
exit $status
