#!/bin/sh
# usage: seeds_adversarial_sets_test.sh SRC DML DIR
# tools/seeds.sh --no-ers --adversarial-set SPEC (MDProp's evaluation under attack, one command per
# row): per seed no ERS, DIR/seed-S/<set>/metrics.json equal to `dml eval --images` on the attack's
# own adversarial array (which is not kept) clustered for NMI as the clean split was (the seed's
# k-means seed and eval.kmeans_restarts), an aggregate per set over the seeds; a second call skips
# what is done and redoes only a set whose metrics.json is missing. Under the device tool ($OUT
# set) each seed's files come back as one archive, $OUT/quick-tiny-seed-S.tar.gz.
set -e
src=$1; dml=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
tiny="--set data.name=synthetic --set data.root=channels=1,size=28,classes=10,images=100
--set model.embedding_dim=16 --set sampler.pairs_per_batch=8 --set sampler.max_batches_per_epoch=3
--set epochs=1 --set eval.max_images=0 --set eval.kmeans_restarts=2"
stax=STAX:eps=0.3:alpha=0.1:pgditer=2
mtax=MTAX:T=2:eps=0.3:alpha=0.1:pgditer=2
run() {  # run LOG: the seeds command with both sets
  # shellcheck disable=SC2086
  "$src/tools/seeds.sh" "$src/configs/quick.json" --seeds 0,1 --out "$d/quick-tiny" --dml "$dml" \
    --device cpu --no-ers --adversarial-set "$stax" --adversarial-set "$mtax" $tiny \
    > "$d/$1" 2>&1 || { cat "$d/$1"; exit 1; }
}
OUT="$d/out" run first.log
for s in 0 1; do
  tar -tzf "$d/out/quick-tiny-seed-$s.tar.gz" | sort > "$d/archive-$s.txt"
  printf '%s\n' mtax-t2/attack.json mtax-t2/attack.log mtax-t2/metrics.json run/log.jsonl \
    run/metrics.json run/model.safetensors stax/attack.json stax/attack.log stax/metrics.json \
    train.log | diff - "$d/archive-$s.txt"
done
test "$(find "$d/out" -type f | wc -l)" -eq 2
tar -xzf "$d/out/quick-tiny-seed-1.tar.gz" -C "$d/out" stax/metrics.json
cmp "$d/out/stax/metrics.json" "$d/quick-tiny/seed-1/stax/metrics.json"
for s in 0 1; do
  test ! -e "$d/quick-tiny/seed-$s/ers.json"
  for set in stax mtax-t2; do
    test -s "$d/quick-tiny/seed-$s/$set/metrics.json"; test -s "$d/quick-tiny/seed-$s/$set/attack.json"
    test ! -e "$d/quick-tiny/seed-$s/$set/adversarial.npy"
  done
done
grep -q '"kmeans_seed": 1,' "$d/quick-tiny/seed-1/run/metrics.json"
grep -q '"kmeans_restarts": 2' "$d/quick-tiny/seed-1/run/metrics.json"
m=$d/quick-tiny/seed-1/run/model.safetensors
"$dml" attack --checkpoint "$m" --attack "$mtax" --device cpu --save-adversarial "$d/adv.npy" \
  > /dev/null 2>&1
"$dml" eval --checkpoint "$m" --images "$d/adv.npy" --device cpu --seed 1 --kmeans-restarts 2 \
  --json > "$d/mtax.json"
cmp "$d/mtax.json" "$d/quick-tiny/seed-1/mtax-t2/metrics.json"
if cmp -s "$d/quick-tiny/seed-1/stax/metrics.json" "$d/quick-tiny/seed-1/run/metrics.json"; then
  echo "the stax set scored as the clean split"; exit 1
fi
grep -q '| quick-tiny stax | 2 |' "$d/quick-tiny/aggregate-stax.md"
grep -q '| quick-tiny mtax-t2 | 2 |' "$d/quick-tiny/aggregate-mtax-t2.md"
grep -qF 'NMI from the least-inertia of 2 k-means++ runs per evaluation.' "$d/quick-tiny/aggregate-stax.md"
cp "$d/quick-tiny/seed-0/stax/metrics.json" "$d/stax0.json"
run second.log
test "$(grep -c 'done, skipped' "$d/second.log")" -eq 2
rm "$d/quick-tiny/seed-1/stax/metrics.json"
run third.log
test "$(grep -c '==> adversarial set' "$d/third.log")" -eq 1
grep -q "==> adversarial set $stax" "$d/third.log"
cmp "$d/stax0.json" "$d/quick-tiny/seed-0/stax/metrics.json"
test -s "$d/quick-tiny/seed-1/stax/metrics.json"
echo "adversarial sets over seeds"
