#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a while (docs/testing.md, Fuzzing).
#   tools/fuzz.sh [seconds per target, default 60]
# Crashing inputs are written to build-fuzz/crashes/<target>/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
BUILD="$ROOT/build-fuzz"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DENGINE_CUDA=OFF -DENGINE_FUZZ=ON \
  -DENGINE_BUILD_TESTS=OFF -DENGINE_WERROR=OFF -DENGINE_CPU_AVX2=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
status=0
# Seed inputs (read, never written): valid files the fuzzer mutates from, so it reaches past the
# format checks quickly. The first corpus directory is where libFuzzer keeps what it finds.
seeds_of() {
  case "$1" in
    fuzz_image) echo "$ROOT/tests/fuzz/seeds/image" ;;
    fuzz_attack_spec) echo "$ROOT/tests/fuzz/seeds/attack_spec" ;;
    fuzz_config) echo "$ROOT/configs" ;;  # every reference config (read recursively)
  esac
}
for target in fuzz_safetensors fuzz_npy fuzz_idx fuzz_mat fuzz_image fuzz_attack_spec fuzz_config; do
  cmake --build "$BUILD" -j "$(nproc)" --target "$target"
  mkdir -p "$BUILD/crashes/$target" "$BUILD/corpus/$target"
  echo "==> $target for ${SECONDS_PER_TARGET}s"
  corpora=("$BUILD/corpus/$target")
  seeds="$(seeds_of "$target")"
  if [ -n "$seeds" ]; then corpora+=("$seeds"); fi
  "$BUILD/tests/fuzz/$target" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 \
    -artifact_prefix="$BUILD/crashes/$target/" "${corpora[@]}" || status=1
done
exit $status
