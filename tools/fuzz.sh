#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a while (docs/testing.md, Fuzzing).
#   tools/fuzz.sh [seconds per target, default 60] [target ...]   (default: every target)
# The recorded run is `tools/fuzz.sh 600`. Each target starts from its corpus kept in the
# repository (tests/fuzz/corpus/<target>/) and its hand-made seeds (tests/fuzz/seeds/...); after
# the run, libFuzzer's -merge=1 -use_counters=0 rewrites the kept corpus as the smallest set of
# inputs that reaches every edge the old corpus, the seeds and the run reached (edges only: with
# hit counts as well, the JSON targets kept three to four times the files for one or two more
# edges). Crashing inputs go to build-fuzz/crashes/<target>/, each target's log to
# build-fuzz/logs/<target>.log, and any crash makes the script fail (its corpus is then left as
# it was).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
shift || true
BUILD="$ROOT/build-fuzz"
# Seeds (read, never written; tests/fuzz/seeds/make_seeds.py writes the binary ones). A new
# target: one line here and one fuzz_target line in tests/fuzz/CMakeLists.txt.
seeds_of() {
  case "$1" in
    fuzz_safetensors) echo "$ROOT/tests/fuzz/seeds/safetensors" ;;
    fuzz_pth) echo "$ROOT/tests/fuzz/seeds/pth" ;;
    fuzz_npy) echo "$ROOT/tests/fuzz/seeds/npy" ;;
    fuzz_idx) echo "$ROOT/tests/fuzz/seeds/idx" ;;
    fuzz_mat) echo "$ROOT/tests/fuzz/seeds/mat" ;;
    fuzz_image) echo "$ROOT/tests/fuzz/seeds/image" ;;
    fuzz_attack_spec) echo "$ROOT/tests/fuzz/seeds/attack_spec" ;;
    fuzz_config) echo "$ROOT/configs" ;;  # every reference config (read recursively)
    fuzz_list_file) echo "$ROOT/tests/fuzz/seeds/list_file" ;;
    fuzz_result_json) echo "$ROOT/tests/fuzz/seeds/result_json" ;;
    fuzz_event_file) echo "$ROOT/tests/fuzz/seeds/event_file" ;;
    fuzz_model_metadata) echo "$ROOT/tests/fuzz/seeds/model_metadata" ;;
    *) echo "tools/fuzz.sh: no seeds line for $1" >&2; exit 2 ;;
  esac
}
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(fuzz_safetensors fuzz_pth fuzz_npy fuzz_idx fuzz_mat fuzz_image fuzz_list_file
           fuzz_attack_spec fuzz_config fuzz_result_json fuzz_model_metadata fuzz_event_file)
fi
for target in "${TARGETS[@]}"; do seeds_of "$target" > /dev/null; done

# -O1 with line tables, as libFuzzer's documentation advises; assertions stay on (no NDEBUG).
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DENGINE_CUDA=OFF -DENGINE_FUZZ=ON \
  -DENGINE_BUILD_TESTS=OFF -DENGINE_WERROR=OFF -DENGINE_CPU_AVX2=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" > /dev/null
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}"

status=0
for target in "${TARGETS[@]}"; do
  binary="$BUILD/tests/fuzz/$target"
  kept="$ROOT/tests/fuzz/corpus/$target"
  found="$BUILD/corpus/$target"  # what this run adds, before the merge
  mkdir -p "$kept" "$found" "$BUILD/crashes/$target" "$BUILD/logs"
  corpora=("$found" "$kept")
  seeds="$(seeds_of "$target")"
  corpora+=("$seeds")
  log="$BUILD/logs/$target.log"
  echo "==> $target for ${SECONDS_PER_TARGET}s (log: $log)"
  # The first corpus directory is the one libFuzzer writes to. A single allocation or a resident
  # size over 2 GB, an input that runs 3 minutes, a leak: each is a crash. (The largest image the
  # loader accepts, 2^26 pixels, takes up to a minute to decode under the sanitizers; libFuzzer
  # keeps inputs over 10 s as slow-unit-* beside the crashes, for reading, not as failures.)
  if ! "$binary" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=180 \
      -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$target/" "${corpora[@]}" > "$log" 2>&1; then
    echo "$target: CRASH, see $log and $BUILD/crashes/$target/" >&2
    status=1
    continue
  fi
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec)' "$log" || true
  merged="$BUILD/merged/$target"
  rm -rf "$merged" && mkdir -p "$merged"
  "$binary" -merge=1 -use_counters=0 -rss_limit_mb=2048 -timeout=180 "$merged" "${corpora[@]}" \
    >> "$log" 2>&1
  rm -rf "$kept" && mv "$merged" "$kept" && rm -rf "$found"
  echo "$target: corpus $(find "$kept" -type f | wc -l) files, $(cat "$kept"/* | wc -c) bytes"
done
exit $status
