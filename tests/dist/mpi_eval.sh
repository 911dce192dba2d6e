#!/bin/sh
# `mpirun -n 2 dml eval` (each rank embeds half of the batches, the rows are gathered) prints the
# same JSON, byte for byte, as `dml eval`: the same batches give the same rows, and the metrics
# are computed from the same [N, D] embedding. A subcommand that does not run over several ranks
# is refused (exit 2) instead of running twice.
# Usage: mpi_eval.sh DML WORK_DIR TRAIN_ARGS...
dml=$1 dir=$2
shift 2
. "$(dirname "$0")/mpi_test_start.sh"
train_tiny_model "$@"
eval_args="eval --checkpoint $dir/run/model.safetensors --device cpu --json --max-images 300
  --batch-size 64"
# shellcheck disable=SC2086
"$dml" $eval_args > "$dir/single.json" 2> "$dir/log" || fail "dml eval"
# shellcheck disable=SC2086
timeout 120 $mpirun "$dml" $eval_args > "$dir/two_ranks.json" 2> "$dir/log" ||
  fail "mpirun -n 2 dml eval"
[ "$(wc -l < "$dir/two_ranks.json")" -eq 1 ] || fail "two ranks printed $(wc -l < "$dir/two_ranks.json") lines"
cmp "$dir/single.json" "$dir/two_ranks.json" || fail "the JSON differs"
timeout 60 $mpirun "$dml" info --model c2f2 > "$dir/log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "mpirun -n 2 dml info: exit $rc"
grep -q "started as 2 MPI ranks, but 'dml info' runs as one process" "$dir/log" ||
  fail "no refusal message"
echo "mpi eval ok"
