#!/bin/sh
# `mpirun -n 2 dml ers` (rank r runs the profile's attacks r, r + 2, ...; the gallery embedding is
# divided by batches) prints the JSON of `dml ers`, byte for byte once the "seconds" fields (wall
# times, different in any two runs) are taken out: each attack draws from its own stream, so it
# gives the same numbers on any rank. --out is written by rank 0 only, with the same content.
# Usage: mpi_ers.sh DML WORK_DIR TRAIN_ARGS...
dml=$1 dir=$2
shift 2
. "$(dirname "$0")/mpirun_env.sh"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; cat "$dir/log"; exit 1; }
"$dml" train "$@" --set output_dir="$dir/run" > "$dir/log" 2>&1 || fail "dml train"
ers_args="ers --checkpoint $dir/run/model.safetensors --profile rob28 --device cpu --json
  --max-images 4 --batch-size 4"
without_seconds() { sed 's/"seconds":[-+.0-9eE]*//g' "$1"; }
# shellcheck disable=SC2086
"$dml" $ers_args --out "$dir/single_out.json" > "$dir/single.json" 2> "$dir/log" ||
  fail "dml ers"
# shellcheck disable=SC2086
timeout 200 $mpirun "$dml" $ers_args --out "$dir/two_out.json" > "$dir/two_ranks.json" \
  2> "$dir/log" || fail "mpirun -n 2 dml ers"
[ "$(wc -l < "$dir/two_ranks.json")" -eq 1 ] || fail "two ranks printed more than one line"
grep -q '"complete":true' "$dir/two_ranks.json" || fail "no complete ERS"
without_seconds "$dir/single.json" > "$dir/a" && without_seconds "$dir/two_ranks.json" > "$dir/b"
cmp "$dir/a" "$dir/b" || fail "the JSON differs beyond the seconds"
sed 's/"seconds": [-+.0-9eE]*//' "$dir/single_out.json" > "$dir/a"
sed 's/"seconds": [-+.0-9eE]*//' "$dir/two_out.json" > "$dir/b"
cmp "$dir/a" "$dir/b" || fail "the --out files differ beyond the seconds"
echo "mpi ers ok"
