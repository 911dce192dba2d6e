#!/bin/sh
# `mpirun -n 2 dml attack` (rank r attacks its share of the batches, its attack stream moved past
# the earlier batches' draws; the per-image values gathered and summed in image order) prints the
# JSON of one process byte for byte once the "seconds" field (a wall time, different in any two
# runs) is taken out. 14 images in batches of 4: rank 0 attacks batches 1-2, rank 1 batches 3-4
# (a full one, whose draws are checked against batch 1's, and the short last one), with attacks
# that draw (CA+: uniform queries; QA-: a permutation of each query's top-1%). Rank 1 starting
# its stream at batch 1's draws instead (the skip removed) gave CA+ other numbers.
# --save-adversarial is refused with 2 ranks.
# Usage: mpi_attack.sh DML WORK_DIR TRAIN_ARGS...
dml=$1 dir=$2
shift 2
. "$(dirname "$0")/mpi_test_start.sh"
train_tiny_model "$@"
for spec in CA:pm=+:W=2:eps=0.03:alpha=0.01:pgditer=2 QA:pm=-:M=2:eps=0.03:alpha=0.01:pgditer=2; do
  attack_args="attack --checkpoint $dir/run/model.safetensors --attack $spec --device cpu --json
    --max-images 14 --batch-size 4"
  # shellcheck disable=SC2086
  "$dml" $attack_args > "$dir/single.json" 2> "$dir/log" || fail "dml attack $spec"
  # shellcheck disable=SC2086
  timeout 200 $mpirun "$dml" $attack_args > "$dir/two_ranks.json" 2> "$dir/log" ||
    fail "mpirun -n 2 dml attack $spec"
  [ "$(wc -l < "$dir/two_ranks.json")" -eq 1 ] || fail "two ranks printed more than one line"
  grep -q '"images":14,' "$dir/two_ranks.json" || fail "not 14 images: $spec"
  without_seconds "$dir/single.json" > "$dir/a" && without_seconds "$dir/two_ranks.json" > "$dir/b"
  cmp "$dir/a" "$dir/b" || fail "the JSON of $spec differs beyond the seconds"
done
# shellcheck disable=SC2086
timeout 60 $mpirun "$dml" $attack_args --save-adversarial "$dir/adv.npy" > "$dir/log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "--save-adversarial with 2 ranks: exit $rc"
grep -q "save-adversarial writes from one process; started as 2 MPI ranks" "$dir/log" ||
  fail "no message naming --save-adversarial and the ranks"
[ ! -e "$dir/adv.npy" ] || fail "--save-adversarial wrote a file with 2 ranks"
echo "mpi attack ok"
