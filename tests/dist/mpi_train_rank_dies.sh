#!/bin/sh
# A rank of `mpirun -n 2 dml train` killed (SIGKILL) mid-run, after the first checkpoint, ends
# the job with an error naming the killed rank, within DML_DIST_TIMEOUT_S (the other rank waits
# in a gradient all-reduce; no hang), and leaves the last checkpoint intact: dml eval reads it.
# Usage: mpi_train_rank_dies.sh DML WORK_DIR TRAIN_ARGS...
# shellcheck disable=SC2086 # $mpirun (mpi_test_start.sh) is a command line, split on purpose
dml=$1 dir=$2
shift 2
. "$(dirname "$0")/mpi_test_start.sh"
limit=10
# Long enough (400 steps) that the kill lands mid-run; a checkpoint every 3 steps.
DML_DIST_TIMEOUT_S=$limit timeout 120 $mpirun -x DML_DIST_TIMEOUT_S "$dml" train "$@" \
  --set output_dir="$dir/run" --set epochs=1 --set sampler.max_batches_per_epoch=400 \
  > "$dir/log" 2>&1 &
job=$!
waited=0
while [ ! -e "$dir/run/checkpoint.safetensors" ]; do
  sleep 0.2
  waited=$((waited + 1))
  [ "$waited" -lt 300 ] || fail "no checkpoint after 60 s"
done
# Rank 1: the process under mpirun (under timeout) whose environment says so.
rank1=""
for launcher in $(pgrep -P "$job"); do
  for rank in $(pgrep -P "$launcher"); do
    tr '\0' '\n' < "/proc/$rank/environ" | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=$rank
  done
done
[ -n "$rank1" ] || fail "rank 1's process not found"
kill -9 "$rank1"
start=$(date +%s)
wait "$job"
rc=$?
seconds=$(($(date +%s) - start))
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "exit $rc after the kill (124: the job hung)"
[ "$seconds" -le "$limit" ] || fail "the job ended $seconds s after the kill, more than $limit"
grep -qi "signal 9\|killed" "$dir/log" || fail "no message naming the killed rank"
test ! -e "$dir/run/model.safetensors" || fail "final weights written by a killed run"
"$dml" eval --checkpoint "$dir/run/checkpoint.safetensors" --max-images 100 --json \
  > "$dir/eval.json" 2> "$dir/log" || fail "dml eval of the last checkpoint"
grep -q '"map_at_r10"' "$dir/eval.json" || fail "dml eval printed no metrics"
echo "rank killed: exit $rc after $seconds s; checkpoint intact"
echo "mpi train rank dies ok"
