#!/bin/sh
# `mpirun -n 2 dml ers` (every attack's batches split over the ranks as `dml attack` splits them:
# rank r attacks its share, its attack stream moved past the earlier batches' draws; the gallery
# embedding divided by batches) prints the JSON of `dml ers`, byte for byte once the "seconds"
# fields (wall times, different in any two runs) are taken out. 3 images in batches of 1: rank 0
# attacks batches 1-2, rank 1 batch 3 (a full one, whose draws are checked against batch 1's).
# --out is written by rank 0 only, with the same content. The runs take --worst-case 1 (a restart
# of every attack, the eps = 1 check on 2 images: one batch per rank), whose JSON holds every plain
# attack's summary too, so one pair of runs checks both; the two-rank run is stopped once its
# --out file is first written (after the first attack: "complete" false) and resumed with
# --resume over 2 ranks: the per-image worst cases and the sanity checks equal one process's.
# Usage: mpi_ers.sh DML WORK_DIR TRAIN_ARGS...
dml=$1 dir=$2
shift 2
. "$(dirname "$0")/mpi_test_start.sh"
train_tiny_model "$@"
ers_args="ers --checkpoint $dir/run/model.safetensors --profile rob28 --device cpu --json
  --max-images 3 --batch-size 1"
worst_args="--worst-case 1 --sanity-images 2"
# Fails unless the printed JSON ($1, $2) and the --out files ($3, $4) agree beyond the seconds.
same_results() {
  [ "$(wc -l < "$2")" -eq 1 ] || fail "two ranks printed more than one line"
  grep -q '"complete":true' "$2" || fail "no complete ERS"
  without_seconds "$1" > "$dir/a" && without_seconds "$2" > "$dir/b"
  cmp "$dir/a" "$dir/b" || fail "the JSON differs beyond the seconds ($5)"
  sed 's/"seconds": [-+.0-9eE]*//' "$3" > "$dir/a"
  sed 's/"seconds": [-+.0-9eE]*//' "$4" > "$dir/b"
  cmp "$dir/a" "$dir/b" || fail "the --out files differ beyond the seconds ($5)"
}
# shellcheck disable=SC2086
"$dml" $ers_args $worst_args --out "$dir/single_worst_out.json" > "$dir/single_worst.json" \
  2> "$dir/log" || fail "dml ers --worst-case"
grep -q '"worst_case":' "$dir/single_worst.json" || fail "no worst_case in the JSON"
# shellcheck disable=SC2086
timeout 200 $mpirun "$dml" $ers_args $worst_args --out "$dir/two_worst_out.json" \
  > /dev/null 2> "$dir/log" &
job=$!
tries=0
until [ -e "$dir/two_worst_out.json" ] || [ "$tries" -ge 1500 ]; do
  sleep 0.1
  tries=$((tries + 1))
done
kill "$job" 2> /dev/null
wait "$job"
grep -q '"complete": false' "$dir/two_worst_out.json" ||
  fail "the two-rank run wrote no --out before its end (or was not stopped)"
# shellcheck disable=SC2086
timeout 200 $mpirun "$dml" $ers_args $worst_args --out "$dir/two_worst_out.json" --resume \
  > "$dir/two_worst.json" 2> "$dir/log" || fail "mpirun -n 2 dml ers --worst-case --resume"
grep -q "ers: resuming .*: [1-8] of 9 attacks already done" "$dir/log" ||
  fail "the resumed run found no finished attacks"
same_results "$dir/single_worst.json" "$dir/two_worst.json" "$dir/single_worst_out.json" \
  "$dir/two_worst_out.json" "rob28 --worst-case 1, resumed"
echo "mpi ers ok"
