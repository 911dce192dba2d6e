#!/bin/sh
# `mpirun -n 2 dml train` takes the decisions of one process with train.micro_batches=2: rank r
# runs micro-batch r of every step (its pairs, its mining and attack draws, its batch-norm
# statistics), and the all-reduce sums the two gradients, g0 + g1 = g1 + g0 exactly. So the
# weights, metrics.json and the log (but its wall-clock images_per_s) are equal byte for byte.
# Only rank 0 prints and writes. A run of 2 ranks resumes with 2 ranks bit-identically, and is
# refused with one process; a single process's checkpoint is refused with 2 ranks. Synchronized
# batch norm trains over 2 ranks.
# Usage: mpi_train.sh DML WORK_DIR TRAIN_ARGS...  (TRAIN_ARGS: 8 pairs per batch, one epoch of 4)
# shellcheck disable=SC2086 # $mpirun (mpi_test_start.sh) is a command line, split on purpose
dml=$1 dir=$2
shift 2
. "$(dirname "$0")/mpi_test_start.sh"
same_run() {
  cmp "$1/model.safetensors" "$2/model.safetensors" || fail "weights differ: $1 $2"
  cmp "$1/metrics.json" "$2/metrics.json" || fail "metrics.json differs: $1 $2"
  sed 's/"images_per_s":[^,}]*//' "$1/log.jsonl" > "$dir/first.jsonl"
  sed 's/"images_per_s":[^,}]*//' "$2/log.jsonl" > "$dir/second.jsonl"
  cmp "$dir/first.jsonl" "$dir/second.jsonl" || fail "log.jsonl differs: $1 $2"
}

"$dml" train "$@" --set train.micro_batches=2 --set output_dir="$dir/one" > "$dir/log" 2>&1 ||
  fail "dml train --set train.micro_batches=2"
timeout 120 $mpirun "$dml" train "$@" --set output_dir="$dir/two" > "$dir/log" 2>&1 ||
  fail "mpirun -n 2 dml train"
same_run "$dir/one" "$dir/two"
[ "$(grep -c '^eval: epoch' "$dir/log")" -eq 1 ] || fail "not rank 0 alone printed the evaluation"
[ "$(grep -c '^trained ' "$dir/log")" -eq 1 ] || fail "not rank 0 alone printed the closing line"
grep -q "2 micro-batches of 4 pairs (train.micro_batches 1 x 2 ranks)" "$dir/log" ||
  fail "no line naming the micro-batches"

timeout 120 $mpirun "$dml" train "$@" --set output_dir="$dir/resumed" --stop-after-batches 3 \
  > "$dir/log" 2>&1 || fail "mpirun -n 2 dml train --stop-after-batches 3"
"$dml" train "$@" --set output_dir="$dir/resumed" --resume > "$dir/log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "resuming 2 ranks' checkpoint in one process: exit $rc, not 2"
grep -q "was written by a run of 2 MPI ranks, and this run has 1 process; resume it with mpirun -n 2" \
  "$dir/log" || fail "no message naming both world sizes"
timeout 120 $mpirun "$dml" train "$@" --set output_dir="$dir/resumed" --resume > "$dir/log" 2>&1 ||
  fail "mpirun -n 2 dml train --resume"
same_run "$dir/two" "$dir/resumed"

timeout 120 $mpirun "$dml" train "$@" --set train.micro_batches=2 --set output_dir="$dir/one" \
  --resume > "$dir/log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "resuming one process's checkpoint with 2 ranks: exit $rc"
grep -q "was written by a run of 1 process, and this run has 2 MPI ranks" "$dir/log" ||
  fail "no message naming both world sizes"

# train.batch_norm synchronized: each BN layer's statistics over both ranks' rows (equal to one
# process's over the concatenated batch: dist.mpi_gradient_buckets_and_synchronized_batch_norm);
# it trains, and its losses are not the per-replica run's.
timeout 120 $mpirun "$dml" train "$@" --set train.batch_norm=synchronized \
  --set output_dir="$dir/sync" > "$dir/log" 2>&1 ||
  fail "mpirun -n 2 dml train --set train.batch_norm=synchronized"
grep '"type":"train"' "$dir/sync/log.jsonl" | sed 's/"images_per_s":[^,}]*//' > "$dir/first.jsonl"
grep '"type":"train"' "$dir/two/log.jsonl" | sed 's/"images_per_s":[^,}]*//' > "$dir/second.jsonl"
[ -s "$dir/first.jsonl" ] || fail "synchronized batch norm: no training lines in log.jsonl"
cmp -s "$dir/first.jsonl" "$dir/second.jsonl" &&
  fail "synchronized batch norm logged the per-replica run's losses"
echo "mpi train ok"
