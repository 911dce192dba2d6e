#!/usr/bin/env bash
# Run on a GPU machine (docs/gpu.md), from the repository root: builds with CUDA, runs the CUDA-tagged
# tests, the GPU acceptance runs of the open issues (dml metrics on 100,000 x 512 embeddings, CPU
# against CUDA; vanilla Fashion-MNIST training on CUDA), the kernel benchmark, the CUDA tests under
# compute-sanitizer (memcheck, racecheck, initcheck) and the CPU suite, into one Markdown log:
#   docs/benchmarks/<date>-<gpu>-<short commit>.md   (also copied to $OUT after every step)
#
#   tools/gpu_check.sh [STEP...]     e.g. tools/gpu_check.sh bench racecheck
#   tools/gpu_check.sh performance   the performance profile (issue 32), meant as a session's first
#                                    call: configure, build only dml and the kernel and op tests
#                                    (build-perf), version, the mma.sync layout test
#                                    (mma-layout), their [cuda] cases (kernel-tests),
#                                    bench, bench-tc-conv-mma (ENGINE_TC_CONV=mma's tf32
#                                    and bf16 conv rows), train-bench:* with the one-pass
#                                    profiles; a later plain call runs the rest and skips what
#                                    this one did
#
# Steps, in order: configure build version mma-layout cuda-tests metrics-100k train-vanilla
# train-nccl bench
# bench-tc-conv-mma memcheck:<test program> train-bench:{vanilla,est,act} train-concurrent:est
# train-bench-resnet18:* train-bench-resnet50:* racecheck:<...>
# initcheck:<...> cpu-tests
# (a name before ':' selects all). Nothing runs after a failed configure or build, or when the
# program sees no GPU; GPU_CHECK_RETRY_FAILED=1 runs failed steps again after a fix.
# Each call spends at most GPU_CHECK_SECONDS (default 570 when $OUT is set, i.e. under the device
# tool, whose commands stop at 600 s; otherwise no limit) and remembers what finished in
# <build>/gpu-check/, so the same command again on the same machine goes on where it stopped
# (tools/gpu_steps.sh). Exit status: 0 all passed, 1 some step failed, 3 some step not run yet,
# 2 no step has the name given. GPU_CHECK_METRICS_SECONDS (default 120) caps each device's run in
# the metrics-100k step, GPU_CHECK_SANITIZER_SECONDS (default 120) each racecheck and initcheck
# program.
# Dependencies: Debian packages (and Fashion-MNIST) carried in .gpu-deps/ by tools/gpu_deps.sh
# when the machine has no package registry; cuDNN from the system or PyTorch's nvidia-cudnn wheel.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT" || exit 1
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
JOBS="$(nproc)"
GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
# A log under docs/benchmarks/ claims GPU results: never write one on a machine without a GPU
# (ALLOW_NO_GPU=1 runs the script anyway, e.g. to test the script itself; its log stays in
# <build>/gpu-check/ and $OUT).
if [ -z "$GPU" ] && [ "${ALLOW_NO_GPU:-0}" != 1 ]; then
  echo "tools/gpu_check.sh: no GPU visible (nvidia-smi lists none); run it on a GPU machine" >&2
  exit 1
fi
GPU_SLUG="$(echo "${GPU:-unknown-gpu}" | tr ' ' '-' | tr -cd 'A-Za-z0-9._-')"
# The device tool sends a copy of the working tree, perhaps without .git: then name the commit in
# the command (GPU_CHECK_COMMIT=abc1234 tools/gpu_check.sh), or the log says "unknown".
COMMIT="${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
DIRTY="$(git status --porcelain 2>/dev/null | grep -qv '^??' && echo ' (with uncommitted changes)')"
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
DATE="$(date -u +%Y-%m-%d)"

source "$ROOT/tools/gpu_env.sh"
source "$ROOT/tools/gpu_steps.sh"
STATE="$BUILD/gpu-check"
BUDGET="${GPU_CHECK_SECONDS:-$([ -n "${OUT:-}" ] && echo 570 || echo 0)}"
LOG_NAME="$DATE-$GPU_SLUG-$COMMIT.md"
if [ -z "$GPU" ]; then LOG_NAME="gpu-check-without-gpu-$COMMIT.md"; fi
WANTED=("$@")
PERFORMANCE=0
if [ "$*" = performance ]; then
  PERFORMANCE=1
  WANTED=(configure build-perf version mma-layout kernel-tests bench bench-tc-conv-mma train-bench)
  # GPU_CHECK_RESNET=0 leaves out the ResNet-18 224 rows (train-bench-resnet18:*, below) when a
  # call is pressed for time.
  if [ "${GPU_CHECK_RESNET:-1}" != 0 ]; then WANTED+=(train-bench-resnet18); fi
fi
steps_begin "$(
  echo "# GPU check: $GPU, commit $COMMIT$DIRTY, $DATE"
  echo
  echo "Produced by \`tools/gpu_check.sh${*:+ $*}\`. Host: $(uname -srm), $JOBS cores."
  echo
  echo '```'
  nvidia-smi 2>&1 | head -15
  nvcc --version 2>&1 | tail -2
  echo '```'
)"

# ---- build and the CUDA tests ----
# The CPU emulator of the kernels (label emulated) is for machines without a GPU: not built here,
# which saves device time.
# Warnings stay warnings here: the GPU machine's compilers may differ from the build machine's,
# where CI keeps -Werror, and a new warning must not cost the session its check. Ninja where the
# image has no make.
GENERATOR=()
if ! command -v make > /dev/null && command -v ninja > /dev/null; then GENERATOR=(-G Ninja); fi
run_step configure "configure" cmake -S "$ROOT" -B "$BUILD" "${GENERATOR[@]}" -DENGINE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DENGINE_CUDA_EMULATOR=OFF -DCMAKE_BUILD_TYPE=Release \
  -DENGINE_WERROR=OFF "${CMAKE_EXTRA[@]}"
steps_require configure "the configure step failed"
if [ "$PERFORMANCE" = 1 ]; then
  # Only what the performance steps run: the program, and the tests of the kernels and ops an
  # attack pass launches (about half of the full build).
  run_step build-perf "build dml, kernels_test, ops_test" cmake --build "$BUILD" -j "$JOBS" \
    --target dml kernels_test ops_test
  steps_require build-perf "the build failed"
else
  run_step build "build" cmake --build "$BUILD" -j "$JOBS"
  steps_require build "the build failed"
fi
# What the program sees; with "GPUs visible: 0" every CUDA test would skip (and pass), so the
# step fails and nothing after it runs.
# shellcheck disable=SC2016  # $0 is expanded by the inner bash
run_step version "dml --version" bash -c '"$0" --version && ! "$0" --version | grep -q "GPUs visible: 0"' \
  "$BUILD/dml"
steps_require version "the program sees no GPU"
# The one-instruction mma.sync and wgmma layout tests (tests/kernels/mma_sync_test.cpp, wgmma_test.cpp)
# before any kernel that relies on those layouts (kernels/common/mma_sync.cuh, wgmma.cuh) is tested
# or timed.
run_step mma-layout "mma.sync and wgmma layout tests (ctest -L cuda -R '^kernels\.(mma\.sync|wgmma)')" \
  ctest --test-dir "$BUILD" -L cuda -R '^kernels\.(mma\.sync|wgmma)' --no-tests=error --output-on-failure
run_step cuda-tests "CUDA tests (ctest -L cuda)" ctest --test-dir "$BUILD" -L cuda --no-tests=error \
  --output-on-failure -j 4
# The performance profile's correctness gate: the [cuda] cases of the kernels and ops (every
# kernel an attack pass launches, against the CPU reference) before any of them is timed. It
# includes the BF16 references of the bench's bf16 rows, compiled but not yet run on a GPU:
# kernels.bf16_round cuda (the FP32 -> BF16 rounding), ops.matmul_cublas_precision bf16 (cuBLAS's
# cublasGemmEx on BF16 operands), ops.conv2d cudnn bf16 (cuDNN's PSEUDO_BFLOAT16 configuration;
# the emulator has no cuDNN) and ops.matmul cuda bf16 policy with the cuBLAS backend.
if [ "$PERFORMANCE" = 1 ]; then
  run_step kernel-tests "CUDA tests of kernels and ops (ctest -L cuda -R '^(kernels|ops)\.')" \
    ctest --test-dir "$BUILD" -L cuda -R '^(kernels|ops)\.' --no-tests=error --output-on-failure \
    -j 4
fi

# ---- acceptance runs of the open issues ----
# Issue 5: dml metrics on 100,000 x 512 random embeddings in 1,000 classes, CUDA then CPU (each
# capped at METRICS_SECONDS: the point is the ratio, and a CPU run cut there is still an answer;
# the 2-core build machine needed 118 s on 2026-11-27, so 16 cores should finish well inside the
# cap, and a session has only 15 minutes of device time for everything).
# shellcheck disable=SC2317  # these functions run through `bash -c` under run_step's timeout
metrics_100k() {
  local dir="$STATE/metrics-100k"
  mkdir -p "$dir"
  python3 -c "
import numpy as np
rng = np.random.default_rng(0)
np.save('$dir/embeddings.npy', rng.standard_normal((100000, 512), dtype=np.float32))
np.save('$dir/labels.npy', rng.integers(0, 1000, 100000, dtype=np.int64))
" || { echo "metrics-100k: could not write the embeddings (python3 with numpy needed)"; return 1; }
  # The wall time is taken here (the GPU-against-CPU ratio is the acceptance point); GNU time
  # adds the peak RSS where the image has it.
  local timer=()
  if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -f "%M KiB peak RSS"); fi
  local device status=0 device_status start_ms wall_ms
  for device in cuda cpu; do
    echo "--- dml metrics --device $device"
    start_ms=$(($(date +%s%N) / 1000000))
    "${timer[@]}" timeout "$METRICS_SECONDS" "$BUILD/dml" metrics \
      --embeddings "$dir/embeddings.npy" --labels "$dir/labels.npy" --json --device "$device"
    device_status=$?
    wall_ms=$(($(date +%s%N) / 1000000 - start_ms))
    printf -- '--- %s: %d.%03d s wall, exit %d\n' "$device" $((wall_ms / 1000)) $((wall_ms % 1000)) \
      "$device_status"
    if [ "$device_status" = 124 ]; then
      echo "--- $device: stopped at $METRICS_SECONDS s, unfinished"
      if [ "$device" = cuda ]; then status=1; fi  # the GPU run must finish; the CPU one may not
    elif [ "$device_status" != 0 ]; then
      status=$device_status
    fi
  done
  return "$status"
}
# Issue 6: the vanilla reproduction config trained on CUDA (Fashion-MNIST from .gpu-deps).
# shellcheck disable=SC2317
train_vanilla() {
  local dir="$STATE/train-vanilla"
  "$BUILD/dml" train --config configs/fashion/vanilla.json --device cuda --overwrite \
    --set output_dir="$dir" || return $?
  echo "--- metrics.json"
  cat "$dir/metrics.json"
  if [ -n "${OUT:-}" ]; then cp "$dir/log.jsonl" "$OUT/train-vanilla-cuda.log.jsonl"; fi
}
# Issue 35 point 5: data-parallel training with one MPI rank per GPU (at most 2) on CUDA equals
# one process's run with train.micro_batches = that many ranks, as the CPU tests
# (dist.mpi_train_equals_micro_batches) check: "equal" is the same bytes of model.safetensors and
# metrics.json, and of log.jsonl without its wall-clock images_per_s. Two ranks are bit for bit
# (the gradient sum g0 + g1 is one commutative addition; docs/distributed.md), more are not, so
# a machine with more GPUs runs 2. With one GPU, mpirun -n 1 is a world of one: it checks the MPI
# start on the GPU machine, but no collective runs (the NCCL all-reduce needs 2 GPUs).
# Skipped, with a line saying why, where mpirun is missing or dml was built without MPI.
# shellcheck disable=SC2317
train_nccl() {
  local dir="$STATE/train-nccl" ranks
  if ! command -v mpirun > /dev/null; then
    echo "train-nccl: skipped: mpirun not found (Debian's openmpi-bin)"
    return 0
  fi
  if ! ldd "$BUILD/dml" | grep -q libmpi; then
    echo "train-nccl: skipped: $BUILD/dml was built without MPI (libopenmpi-dev missing)"
    return 0
  fi
  ldd "$BUILD/dml" | grep -q libnccl || echo "train-nccl: dml has no NCCL: host all-reduce"
  ranks="$(nvidia-smi --list-gpus | grep -c '^GPU')"
  if [ "$ranks" -gt 2 ]; then ranks=2; fi
  if [ "$ranks" -lt 2 ]; then echo "train-nccl: 1 GPU: one rank, no collective runs"; fi
  local args=(train --config configs/quick.json --device cuda --overwrite --set epochs=1
    --set model.embedding_dim=16 --set sampler.pairs_per_batch=8
    --set sampler.max_batches_per_epoch=4 --set eval.max_images=100 --set seed=3
    --set model.name=c2f2-bn --set defense.name=est --set defense.pgd.steps=1)
  "$BUILD/dml" "${args[@]}" --set train.micro_batches="$ranks" --set output_dir="$dir/one" ||
    return 1
  timeout 300 mpirun --allow-run-as-root --mca btl_vader_single_copy_mechanism none \
    -n "$ranks" "$BUILD/dml" "${args[@]}" --set output_dir="$dir/ranks" || return 1
  local file status=0
  for file in model.safetensors metrics.json; do
    cmp "$dir/one/$file" "$dir/ranks/$file" || status=1
  done
  cmp <(sed 's/"images_per_s":[^,}]*//' "$dir/one/log.jsonl") \
    <(sed 's/"images_per_s":[^,}]*//' "$dir/ranks/log.jsonl") || status=1
  if [ "$status" = 0 ]; then
    echo "train-nccl: $ranks rank(s) wrote the bytes of one process with train.micro_batches $ranks"
  fi
  return "$status"
}
export -f metrics_100k train_vanilla train_nccl
METRICS_SECONDS="${GPU_CHECK_METRICS_SECONDS:-120}"
export BUILD STATE METRICS_SECONDS
run_step metrics-100k "dml metrics, 100,000 x 512, CUDA and CPU" bash -c metrics_100k
run_step train-vanilla "dml train configs/fashion/vanilla.json --device cuda" bash -c train_vanilla
run_step train-nccl "mpirun -n GPUs dml train --device cuda against one process" bash -c train_nccl

# ---- benchmark ----
BENCH_JSON="$STATE/${LOG_NAME%.md}.json"
# Precision modes of dml bench: every one in a full check; the performance profile leaves out
# pytorch-default (its GEMM rows are fp32's and its conv rows tf32's) to save device time.
BENCH_MODES="${GPU_CHECK_BENCH_MODES:-$([ "$PERFORMANCE" = 1 ] && echo fp32,tf32,bf16 || echo fp32,pytorch-default,tf32,bf16)}"
run_step bench "dml bench" "$BUILD/dml" bench --json "$BENCH_JSON" --overwrite --commit "$COMMIT" \
  --precision-modes "$BENCH_MODES"
if [ -n "${OUT:-}" ] && [ -f "$BENCH_JSON" ]; then cp "$BENCH_JSON" "$OUT/"; fi
# The A/B of our two TF32 and BF16 convolutions (engine/backend.h): the bench step timed the
# default (ENGINE_TC_CONV=wmma); this one the ResNet-18 conv rows in tf32 and bf16 on mma.sync,
# 10 repeats to keep the profile in its budget (the whole bench step took 5 s in FP32 on the
# H200). Into the log, not $OUT.
run_step bench-tc-conv-mma "dml bench, tf32 and bf16 convolutions, ENGINE_TC_CONV=mma" \
  env ENGINE_TC_CONV=mma "$BUILD/dml" bench --precision-modes tf32,bf16 --filter "conv " --repeats 10 \
  --commit "$COMMIT"
# Whole training steps against PyTorch on the same GPU (docs/performance.md):
# tools/peers/pytorch_train_step.py times the config in PyTorch (P0 robrank as-is, P1 best eager,
# P2 torch.compile, P3 the PGD loop captured: the faster of torch.cuda.graph and
# torch.compile(mode="reduce-overhead")), then `dml bench --train` times ours and prints
# peer/ours, its instruments (launches, allocations, GPU-busy fraction) and one attack pass kernel
# by kernel (--profile). One step per config. The performance profile times P1 and P3 only (P3's
# compile candidate compiles once per config; P0 and P2 add nothing the targets need). Both sides
# in GPU_CHECK_PRECISION (default fp32): the peer's --precision, and ours where dml has the mode
# (fp32, tf32, bf16; for pytorch-default ours stays the config's, fp32).
TRAIN_BENCH_VARIANTS=p0,p1,p2,p3
if [ "$PERFORMANCE" = 1 ]; then TRAIN_BENCH_VARIANTS=p1,p3; fi
PRECISION="${GPU_CHECK_PRECISION:-fp32}"
export TRAIN_BENCH_VARIANTS PRECISION
# shellcheck disable=SC2317
train_bench() {
  local config="configs/fashion/$1.json" dir="$STATE/train-bench" status=0 peer=() ours=()
  mkdir -p "$dir"
  python3 tools/peers/pytorch_train_step.py --config "$config" --device cuda --steps 10 \
    --warmup 3 --variants "$TRAIN_BENCH_VARIANTS" --precision "$PRECISION" \
    --out "$dir/peer-$1.json" || status=1
  if [ -f "$dir/peer-$1.json" ]; then peer=(--peer "$dir/peer-$1.json"); fi
  case "$PRECISION" in fp32 | tf32 | bf16) ours=(--precision "$PRECISION") ;; esac
  "$BUILD/dml" bench --train "$config" --device cuda --steps 10 --warmup 3 "${ours[@]}" \
    "${peer[@]}" --profile --json "$dir/train-$1.json" --overwrite || status=1
  # Into the log rather than $OUT, which brings back at most 8 files.
  local file
  for file in "$dir/peer-$1.json" "$dir/train-$1.json"; do
    if [ -f "$file" ]; then echo "--- $(basename "$file")" && cat "$file"; fi
  done
  return "$status"
}
export -f train_bench

# Seeds side by side on one GPU (tools/seeds.sh --jobs N): wall time of 1, 2 and 3 processes
# each training the first 100 steps of CONFIG at once (dml train --stop-after-batches 100, start-up
# included, output in a scratch folder). The same time for 2 processes as for 1 means the GPU
# was half idle and `--jobs 2` trains two seeds for the price of one; twice the time means it was
# busy. Budget: an EST eta = 32 step took 125 ms on the H200, so 100 steps 12.5 s plus start-up:
# about 1.5 minutes for the three rows.
# shellcheck disable=SC2317
concurrent_train() {  # concurrent_train CONFIG-NAME
  local config="configs/fashion/$1.json" dir="$STATE/train-concurrent" status=0 n i start pids
  for n in 1 2 3; do
    rm -rf "$dir"
    mkdir -p "$dir"
    start=$(date +%s%N)
    pids=()
    for ((i = 0; i < n; i++)); do
      "$BUILD/dml" train --config "$config" --set device=cuda --set seed="$i" \
        --set output_dir="$dir/run-$i" --stop-after-batches 100 > "$dir/run-$i.log" 2>&1 &
      pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || status=1; done
    echo "$n process(es) x 100 steps of $1: $((($(date +%s%N) - start) / 1000000)) ms wall"
  done
  [ "$status" = 0 ] || tail -n 5 "$dir"/run-*.log
  return "$status"
}
export -f concurrent_train

# ResNet at 224 x 224, batch 112 (SPC-2, 56 pairs), EST eta = 32 (issue 33 point 6):
# configs/bench/est-resnet{18,50}-224.json on the synthetic data set (no download). One step per
# precision (GPU_CHECK_RESNET_PRECISIONS, default fp32,tf32,bf16): the peer's P1 and P3 (graph
# candidate only: compiling ResNet-18 under reduce-overhead would take minutes), then ours with
# that peer file, each 1 warm-up + 3 timed steps.
# Budget: a step is 33 forward/backward passes of ResNet-18 at batch 112, about
# 33 x 3 x 1.8 GFLOP x 112 = 20 TFLOP, 0.5-2 s on an H200 by precision. Per precision: the peer's
# P1 4 steps, P3's check 2 + 2 steps and its 4 timed ones = 12 steps, ours 4 = 16 steps, 8-32 s,
# plus start-up (PyTorch import, cuDNN autotuning, our model build; ~20 s): about 30-55 s, so
# 1.5-3 minutes for the three precisions. ResNet-50 (4.1 GFLOP/image, ~2.3x ResNet-18) is its own
# step, train-bench-resnet50:* (~4-7 minutes), not in the performance profile: run it by name in a
# call of its own (tools/gpu_check.sh train-bench-resnet50).
RESNET_PRECISIONS="${GPU_CHECK_RESNET_PRECISIONS:-fp32,tf32,bf16}"
# shellcheck disable=SC2317
resnet_bench() {  # resnet_bench CONFIG-NAME PRECISION
  local config="configs/bench/$1.json" dir="$STATE/train-bench" status=0 peer=()
  local out="$dir/$1-$2"
  mkdir -p "$dir"
  python3 tools/peers/pytorch_train_step.py --config "$config" --device cuda --steps 3 \
    --warmup 1 --variants p1,p3 --p3-candidates graph --precision "$2" --out "$out-peer.json" ||
    status=1
  if [ -f "$out-peer.json" ]; then peer=(--peer "$out-peer.json"); fi
  "$BUILD/dml" bench --train "$config" --device cuda --steps 3 --warmup 1 --precision "$2" \
    "${peer[@]}" --json "$out-train.json" --overwrite || status=1
  local file
  for file in "$out-peer.json" "$out-train.json"; do
    if [ -f "$file" ]; then echo "--- $(basename "$file")" && cat "$file"; fi
  done
  return "$status"
}
export -f resnet_bench

# ---- compute-sanitizer over every test program's [cuda] cases; memcheck first, then the
# PyTorch comparison, then racecheck and initcheck (the order of what a short session gets) ----
# racecheck and initcheck instrument every shared-memory access: on an H200 (2026-11-27) the
# models_test cases that memcheck ran in 3 s did not finish in 228 s under racecheck (ResNet-50's
# forward), nor metrics_test's in 140 s (the kNN tiling sweep's 3,000 small launches). So those
# two tools skip the cases tagged [heavy] (whose kernels the lighter cases also run: ResNet-18,
# the other kNN cases), and each program gets at most SANITIZER_SECONDS (GPU_CHECK_SANITIZER_SECONDS,
# default 120) before it is stopped as unfinished, so one slow program cannot take the call.
SANITIZER_SECONDS="${GPU_CHECK_SANITIZER_SECONDS:-120}"
# shellcheck disable=SC2317  # runs through `bash -c` under run_step's timeout
sanitize_capped() {  # sanitize_capped TOOL EXE FILTER
  timeout --kill-after=10 "$SANITIZER_SECONDS" compute-sanitizer --tool "$1" --error-exitcode 99 \
    "$2" "$3"
  local status=$?
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "stopped at the $SANITIZER_SECONDS s cap (GPU_CHECK_SANITIZER_SECONDS): unfinished"
  fi
  return "$status"
}
export -f sanitize_capped
export SANITIZER_SECONDS
sanitize() {  # sanitize TOOL: one step per test program that has [cuda] cases
  local tool="$1" exe cuda_cases filter="[cuda]"
  if [ "$tool" != memcheck ]; then filter="[cuda]~[heavy]"; fi
  for exe in "$BUILD"/tests/*_test; do
    [ -x "$exe" ] || continue
    # (Catch2 2 exits with the number of tests listed: read the list, not the status.)
    cuda_cases="$("$exe" --list-test-names-only "$filter" 2>/dev/null || true)"
    if [ -z "$cuda_cases" ]; then continue; fi
    if [ "$tool" = memcheck ]; then
      # The tests make some CUDA calls fail on purpose (an allocation of 2^45 floats must give
      # the out-of-memory error); CUDA_CHECK turns every failed call into an error the tests
      # see, so memcheck need not count them.
      run_step "$tool:$(basename "$exe")" "compute-sanitizer $tool: $(basename "$exe") $filter" \
        compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 "$exe" \
        "$filter"
    else
      # shellcheck disable=SC2016  # $0.. are expanded by the inner bash
      run_step "$tool:$(basename "$exe")" "compute-sanitizer $tool: $(basename "$exe") $filter" \
        bash -c 'sanitize_capped "$0" "$1" "$2"' "$tool" "$exe" "$filter"
    fi
  done
}
HAVE_SANITIZER=1
if ! command -v compute-sanitizer > /dev/null; then
  HAVE_SANITIZER=0
  run_step sanitizer "compute-sanitizer" bash -c 'echo "compute-sanitizer: not found"; exit 1'
fi
if [ "$HAVE_SANITIZER" = 1 ]; then sanitize memcheck; fi
for name in vanilla est act; do
  # shellcheck disable=SC2016  # $0 is expanded by the inner bash
  run_step "train-bench:$name" "dml bench --train configs/fashion/$name.json vs PyTorch" \
    bash -c 'train_bench "$0"' "$name"
done
run_step "train-concurrent:est" "1, 2 and 3 dml train processes at once on the GPU (seeds.sh --jobs)" \
  bash -c 'concurrent_train est'
for model in resnet18 resnet50; do
  for precision in ${RESNET_PRECISIONS//,/ }; do
    # shellcheck disable=SC2016  # $0 and $1 are expanded by the inner bash
    run_step "train-bench-$model:$precision" \
      "dml bench --train configs/bench/est-$model-224.json vs PyTorch, $precision" \
      bash -c 'resnet_bench "$0" "$1"' "est-$model-224" "$precision"
  done
done
if [ "$HAVE_SANITIZER" = 1 ]; then
  sanitize racecheck
  sanitize initcheck
fi

# ---- the CPU suite last: CI runs it on every commit, here it only shows the build is whole ----
run_step cpu-tests "CPU tests (ctest -L cpu)" ctest --test-dir "$BUILD" -L cpu --no-tests=error \
  --output-on-failure -j "$JOBS"

steps_end
status=$?
if [ -n "$GPU" ]; then
  mkdir -p "$ROOT/docs/benchmarks"
  cp "$LOG" "$ROOT/docs/benchmarks/"
  if [ -f "$BENCH_JSON" ]; then cp "$BENCH_JSON" "$ROOT/docs/benchmarks/"; fi
fi
exit $status
