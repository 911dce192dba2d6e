#!/usr/bin/env bash
# Run on a GPU machine (SPEC §14), from the repository root: builds with CUDA, runs the CUDA-tagged
# tests and the CPU suite, runs the CUDA tests under compute-sanitizer (memcheck, racecheck,
# initcheck), then the kernel benchmark, and writes everything to one Markdown log:
#   docs/benchmarks/<date>-<gpu>-<short commit>.md   (also copied to $OUT when set)
# Dependencies: Debian packages carried in .gpu-deps/ (tools/gpu_deps.sh) when the machine has no
# package registry; cuDNN from the system or from PyTorch's nvidia-cudnn wheel.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
JOBS="$(nproc)"
GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
# A log under docs/benchmarks/ claims GPU results: never write one on a machine without a GPU
# (ALLOW_NO_GPU=1 runs the script anyway, e.g. to test the script itself, and logs to $OUT or /tmp).
if [ -z "$GPU" ] && [ "${ALLOW_NO_GPU:-0}" != 1 ]; then
  echo "tools/gpu_check.sh: no GPU visible (nvidia-smi lists none); run it on a GPU machine" >&2
  exit 1
fi
GPU_SLUG="$(echo "${GPU:-unknown-gpu}" | tr ' ' '-' | tr -cd 'A-Za-z0-9._-')"
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
DIRTY="$(git status --porcelain 2>/dev/null | grep -qv '^??' && echo ' (with uncommitted changes)')"
DATE="$(date -u +%Y-%m-%d)"
LOG="$ROOT/docs/benchmarks/$DATE-$GPU_SLUG-$COMMIT.md"
if [ -z "$GPU" ]; then LOG="${OUT:-/tmp}/gpu-check-without-gpu-$COMMIT.md"; fi
mkdir -p "$(dirname "$LOG")"
FAILURES=0

section() { printf '\n## %s\n\n```\n' "$1" >> "$LOG"; }
end_section() { printf '```\n' >> "$LOG"; }
run_step() {  # run_step "title" command...: logs output and status, counts failures
  local title="$1"; shift
  section "$title"
  echo "\$ $*" >> "$LOG"
  local start=$SECONDS
  "$@" >> "$LOG" 2>&1
  local status=$?
  echo "[exit status $status, $((SECONDS - start)) s]" >> "$LOG"
  end_section
  if [ $status -ne 0 ]; then FAILURES=$((FAILURES + 1)); fi
  echo "$title: exit $status"
  return 0
}

{
  echo "# GPU check: $GPU, commit $COMMIT$DIRTY, $DATE"
  echo
  echo "Produced by \`tools/gpu_check.sh\`. Host: $(uname -srm), $JOBS cores."
  echo
  echo '```'
  nvidia-smi 2>&1 | head -15
  nvcc --version 2>&1 | tail -2
  echo '```'
} > "$LOG"

# ---- dependencies ----
CMAKE_EXTRA=()
if [ -d "$ROOT/.gpu-deps/usr" ]; then
  export CMAKE_PREFIX_PATH="$ROOT/.gpu-deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$ROOT/.gpu-deps/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$ROOT/.gpu-deps/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$ROOT/.gpu-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
CUDNN_DIR="$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null || true)"
if [ -n "$CUDNN_DIR" ] && [ -f "$CUDNN_DIR/include/cudnn.h" ]; then
  LIB="$(ls "$CUDNN_DIR"/lib/libcudnn.so* 2>/dev/null | head -1)"
  if [ -n "$LIB" ]; then
    CMAKE_EXTRA+=("-DCUDNN_LIBRARY=$LIB" "-DCUDNN_INCLUDE_DIR=$CUDNN_DIR/include")
    export LD_LIBRARY_PATH="$CUDNN_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
CUBLAS_DIR="$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__))' 2>/dev/null || true)"
if [ -n "$CUBLAS_DIR" ]; then export LD_LIBRARY_PATH="$CUBLAS_DIR/lib:$LD_LIBRARY_PATH"; fi

# ---- build and test ----
# The CPU emulator of the kernels (label emulated) is for machines without a GPU: not built here,
# which saves device time.
run_step "configure" cmake -S "$ROOT" -B "$BUILD" -DENGINE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DENGINE_CUDA_EMULATOR=OFF -DCMAKE_BUILD_TYPE=Release "${CMAKE_EXTRA[@]}"
run_step "build" cmake --build "$BUILD" -j "$JOBS"
# What the program sees: "GPUs visible: 0" here means every CUDA test below will skip.
if "$BUILD/dml" --version > /dev/null 2>&1; then run_step "dml --version" "$BUILD/dml" --version; fi
run_step "CUDA tests (ctest -L cuda)" ctest --test-dir "$BUILD" -L cuda --output-on-failure -j 4
run_step "CPU tests (ctest -L cpu)" ctest --test-dir "$BUILD" -L cpu --output-on-failure -j "$JOBS"

# ---- compute-sanitizer over every test executable's [cuda] cases ----
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck initcheck; do
    for exe in "$BUILD"/tests/*_test; do
      [ -x "$exe" ] || continue
      if ! "$exe" --list-test-names-only "[cuda]" 2>/dev/null | grep -q .; then continue; fi
      run_step "compute-sanitizer $tool: $(basename "$exe") [cuda]" \
        compute-sanitizer --tool "$tool" --error-exitcode 99 "$exe" "[cuda]"
    done
  done
else
  section "compute-sanitizer"; echo "not found on this machine" >> "$LOG"; end_section
  FAILURES=$((FAILURES + 1))
fi

# ---- benchmark ----
if "$BUILD/dml" help 2>/dev/null | grep -q '^  bench'; then
  run_step "dml bench" "$BUILD/dml" bench --json "$ROOT/docs/benchmarks/$DATE-$GPU_SLUG-$COMMIT.json" \
    --commit "$COMMIT"
else
  section "dml bench"; echo "not built yet: this commit has no 'dml bench' subcommand" >> "$LOG"
  end_section
fi

printf '\n## Summary\n\n%s step(s) failed.\n' "$FAILURES" >> "$LOG"
if [ -n "${OUT:-}" ]; then cp "$LOG" "$OUT/" 2>/dev/null; cp "${LOG%.md}.json" "$OUT/" 2>/dev/null; fi
echo "log: $LOG ($FAILURES failed steps)"
exit $(( FAILURES > 0 ? 1 : 0 ))
