#!/bin/sh
# usage: seeds_resume_test.sh SRC DML DIR
# tools/seeds.sh resumes: seed 0 finished by a first call, seed 1 interrupted after 2 training
# steps (dml train --stop-after-batches leaves its checkpoint, as a killed call does); a second
# call skips seed 0 (its files untouched), resumes seed 1 into the weights of an uninterrupted
# training, and aggregates both.
set -e
src=$1; dml=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
tiny="--set model.embedding_dim=16 --set sampler.pairs_per_batch=8 --set sampler.max_batches_per_epoch=4
--set epochs=1 --set eval.max_images=100 --set checkpoint_every_batches=1"
# shellcheck disable=SC2086
"$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 0 --out "$d/quick-tiny" --dml "$dml" --device cpu \
  --ers-images 4 $tiny > "$d/first.log" 2>&1 || { cat "$d/first.log"; exit 1; }
cp "$d/quick-tiny/seed-0/ers.json" "$d/ers0.json"
# shellcheck disable=SC2086
"$dml" train --config "$src/configs/quick.json" $tiny --set seed=1 --set device=cpu \
  --set output_dir="$d/quick-tiny/seed-1/run" --stop-after-batches 2 > /dev/null 2>&1
test -f "$d/quick-tiny/seed-1/run/checkpoint.safetensors"; test ! -f "$d/quick-tiny/seed-1/run/model.safetensors"
# shellcheck disable=SC2086
"$dml" train --config "$src/configs/quick.json" $tiny --set seed=1 --set device=cpu \
  --set output_dir="$d/ref" > /dev/null 2>&1
# shellcheck disable=SC2086
"$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 0,1 --out "$d/quick-tiny" --dml "$dml" --device cpu \
  --ers-images 4 $tiny > "$d/second.log" 2>&1 || { cat "$d/second.log"; exit 1; }
grep -q "seed 0: done, skipped" "$d/second.log"
grep -q "dml train .* --resume" "$d/second.log"
cmp "$d/ers0.json" "$d/quick-tiny/seed-0/ers.json"
cmp "$d/ref/model.safetensors" "$d/quick-tiny/seed-1/run/model.safetensors"
grep -q '"complete": true' "$d/quick-tiny/seed-1/ers.json"
grep -q '| quick-tiny | 2 |' "$d/quick-tiny/aggregate.md"
test -s "$d/quick-tiny/aggregate.svg"
echo "seeds resumed"
