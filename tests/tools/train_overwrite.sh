#!/bin/sh
# usage: train_overwrite.sh DML DIR ARGS...
# A second run into the same output_dir is refused (exit 2) unless --resume or --overwrite, also
# when only the finished run's model.safetensors is left (its checkpoint deleted to save space).
# An overwritten run's log holds only its own records, and a stopped overwrite leaves none of the
# replaced run's final files (model.safetensors, metrics.json) for dml eval to score as its own.
set -e
dml=$1; d=$2; shift 2
rm -rf "$d"
"$dml" train "$@" --set output_dir="$d" >/dev/null 2>&1
test -f "$d/model.safetensors" && test -f "$d/metrics.json"
status=0; "$dml" train "$@" --set output_dir="$d" 2>&1 || status=$?
test "$status" -eq 2
"$dml" train "$@" --set output_dir="$d" --overwrite >/dev/null 2>&1
test "$(grep -c '"type":"eval"' "$d/log.jsonl")" -eq 1
"$dml" train "$@" --set output_dir="$d" --overwrite --stop-after-batches 1 >/dev/null 2>&1
test -f "$d/checkpoint.safetensors"
test ! -e "$d/model.safetensors" && test ! -e "$d/metrics.json"
echo "stopped overwrite left no stale outputs"
"$dml" train "$@" --set output_dir="$d" --resume >/dev/null 2>&1
rm "$d/checkpoint.safetensors"
status=0; "$dml" train "$@" --set output_dir="$d" 2>&1 || status=$?
test "$status" -eq 2
test -f "$d/model.safetensors"
echo "overwrite-ok"
