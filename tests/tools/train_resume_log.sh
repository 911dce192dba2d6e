#!/bin/sh
# usage: train_resume_log.sh DML DIR ARGS...
# A run stopped after 3 steps gets two foreign lines appended to its log.jsonl, as a kill can leave
# them: a record of a step after the checkpoint and a torn line. Resuming must drop both, so the
# finished log equals an uninterrupted run's (less the timing field images_per_s).
set -e
dml=$1; d=$2; shift 2
rm -rf "$d"; mkdir -p "$d"
"$dml" train "$@" --set output_dir="$d/ref" >/dev/null 2>&1
"$dml" train "$@" --set output_dir="$d/k" --stop-after-batches 3 >/dev/null 2>&1
printf '{"type":"train","step":999,"loss":1}\n{"type":"train","ep' >> "$d/k/log.jsonl"
"$dml" train "$@" --set output_dir="$d/k" --resume 2>&1 | grep "dropped 2 record"
sed 's/"images_per_s":[^,]*,//' "$d/ref/log.jsonl" > "$d/ref.log"
sed 's/"images_per_s":[^,]*,//' "$d/k/log.jsonl" > "$d/k.log"
cmp "$d/ref.log" "$d/k.log"
echo "log as uninterrupted"
