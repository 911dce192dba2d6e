#!/bin/sh
# usage: train_closing_line.sh DML DIR ARGS...
# dml train's closing line says how long the process took and how much of it went to
# evaluations; a resumed process also says which steps it ran (its time covers those alone).
set -e
dml=$1; d=$2; shift 2
rm -rf "$d"; mkdir -p "$d"
"$dml" train "$@" --set output_dir="$d/full" 2>/dev/null > "$d/full.out"
steps=$(sed -n 's/.*"steps": \([0-9]*\).*/\1/p' "$d/full/metrics.json")
grep -E "^trained c2f2 for [0-9]+ epochs \($steps steps, 1 forward/backward passes per step\) in [0-9hms]+, [0-9hms]+ of it evaluating; weights $d/full/model.safetensors$" \
  "$d/full.out"
"$dml" train "$@" --set output_dir="$d/k" --stop-after-batches 3 > /dev/null 2>&1
"$dml" train "$@" --set output_dir="$d/k" --resume 2>/dev/null > "$d/resumed.out"
grep -E "^trained c2f2 for [0-9]+ epochs \($steps steps, .*\) in [0-9hms]+, [0-9hms]+ of it evaluating, steps 4 to $steps in this process; weights " \
  "$d/resumed.out"
echo "closing line names the time"
