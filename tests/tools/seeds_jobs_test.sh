#!/bin/sh
# usage: seeds_jobs_test.sh SRC DML DIR
# tools/seeds.sh --jobs 2 runs two seeds at once, half the cores each, and gives byte for byte the
# weights and ERS scores of the same seeds run one after another on every core (dml's results do
# not depend on the thread count); each job's output goes to DIR/seed-S.log. A seed that fails is
# named with its log's end and the call exits 1; --jobs 0 is refused. repro.sh's archive for the
# device tool leaves out weights too large for it; a bad --out-name is refused.
set -e
src=$1; dml=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
tiny="--set model.embedding_dim=16 --set sampler.pairs_per_batch=8 --set sampler.max_batches_per_epoch=4
--set epochs=1 --set eval.max_images=100"
# shellcheck disable=SC2086
"$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 0,1 --out "$d/serial" --dml "$dml" \
  --device cpu --ers-images 2 $tiny > "$d/serial.log" 2>&1 || { cat "$d/serial.log"; exit 1; }
# shellcheck disable=SC2086
env -u OMP_NUM_THREADS "$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 0,1 --jobs 2 \
  --out "$d/jobs" --dml "$dml" --device cpu --ers-images 2 $tiny > "$d/jobs.log" 2>&1 ||
  { cat "$d/jobs.log"; exit 1; }
cores=$(nproc); threads=$((cores / 2 > 0 ? cores / 2 : 1))
for s in 0 1; do
  grep -q "seed $s (.*OMP_NUM_THREADS=$threads, log: $d/jobs/seed-$s.log)" "$d/jobs.log"
  grep -q "seed $s: finished" "$d/jobs.log"
  grep -q "^done: " "$d/jobs/seed-$s.log"
  cmp "$d/serial/seed-$s/run/model.safetensors" "$d/jobs/seed-$s/run/model.safetensors"
  # ERS files differ only in the checkpoint's path and the timings.
  for run in serial jobs; do
    grep -v '"checkpoint":\|"seconds":' "$d/$run/seed-$s/ers.json" > "$d/$run-ers-$s.json"
  done
  cmp "$d/serial-ers-$s.json" "$d/jobs-ers-$s.json"
done
grep -q '| jobs | 2 |' "$d/jobs/aggregate.md"
# A second call finds both seeds done.
"$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 0,1 --jobs 2 --out "$d/jobs" \
  --dml "$dml" --device cpu --ers-images 2 > "$d/again.log" 2>&1 || { cat "$d/again.log"; exit 1; }
grep -q "seed 1: done, skipped" "$d/again.log"
# Failing seeds: named, exit status 1, no aggregate.
status=0
"$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 3,4 --jobs 2 --out "$d/broken" \
  --dml "$d/no-such-dml" --device cpu > "$d/broken.log" 2>&1 || status=$?
test "$status" = 1
grep -q "seed 3 did not finish" "$d/broken.log"
grep -q "seed 4 did not finish" "$d/broken.log"
grep -q "no dml program" "$d/broken.log"
test ! -f "$d/broken/aggregate.md"
status=0
"$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 0 --jobs 0 --out "$d/zero" \
  --dml "$dml" > "$d/zero.log" 2>&1 || status=$?
test "$status" = 2
grep -q "\-\-jobs: '0' is not a count" "$d/zero.log"
# repro.sh under the device tool: one archive in $OUT, without the weights when they would take
# it past the 16 MiB a file may have there (a 21 MB model: D = 2048).
# shellcheck disable=SC2086
OUT="$d/out" "$src/tools/repro.sh" "$src/configs/quick.json" --out "$d/wide" --out-name wide \
  --dml "$dml" --device cpu --no-ers $tiny --set model.embedding_dim=2048 > "$d/wide.log" 2>&1 ||
  { cat "$d/wide.log"; exit 1; }
test "$(stat -c %s "$d/wide/run/model.safetensors")" -gt 16777216
tar -tzf "$d/out/wide.tar.gz" | sort | tr '\n' ' ' > "$d/wide.txt"
test "$(cat "$d/wide.txt")" = "run/log.jsonl run/metrics.json train.log "
test "$(find "$d/out" -type f | wc -l)" -eq 1
status=0
"$src/tools/repro.sh" "$src/configs/quick.json" --out "$d/named" --out-name "a/b" --dml "$dml" \
  > "$d/named.log" 2>&1 || status=$?
test "$status" = 2
grep -q "\-\-out-name 'a/b': use letters, digits" "$d/named.log"
test ! -d "$d/named"
echo "seeds in parallel"
