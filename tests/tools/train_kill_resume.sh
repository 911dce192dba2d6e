#!/bin/sh
# usage: train_kill_resume.sh DML DIR ARGS...
# Kills `dml train ARGS` with SIGKILL at random moments (some land inside a checkpoint write) and
# resumes until it finishes, then compares the final weights and metrics byte for byte with an
# uninterrupted run, and the log (log.jsonl less its timing field) with the uninterrupted log: a
# resume drops the records written after its checkpoint and a torn last line. The kill delay grows
# with each try, so the run always finishes eventually however slow the machine.
set -e
dml=$1; d=$2; shift 2
rm -rf "$d"; mkdir -p "$d"
"$dml" train "$@" --set output_dir="$d/ref" >/dev/null 2>&1
tries=0
while :; do
  tries=$((tries + 1))
  test $tries -lt 200
  t=$(awk -v s=$tries 'BEGIN { srand(); print 0.1 + rand() * 1.0 + s * 0.05 }')
  resume=""
  if [ -e "$d/k/checkpoint.safetensors" ]; then resume=--resume; fi
  if timeout -s KILL "$t" "$dml" train "$@" --set output_dir="$d/k" $resume >/dev/null 2>&1; then
    break
  fi
done
echo "finished after $tries runs"
cmp "$d/ref/model.safetensors" "$d/k/model.safetensors"
cmp "$d/ref/metrics.json" "$d/k/metrics.json"
sed 's/"images_per_s":[^,]*,//' "$d/ref/log.jsonl" > "$d/ref.log"
sed 's/"images_per_s":[^,]*,//' "$d/k/log.jsonl" > "$d/k.log"
cmp "$d/ref.log" "$d/k.log"
echo "bit-identical"
