#!/bin/sh
# usage: robustness_report_test.sh SRC DML DIR
# tools/robustness_report.sh on a tiny model over a 20-image synthetic split: the worst case with
# the restarts asked for, the NES attacks and a transfer attack from a second model (each JSON
# saying what it is), the figure; a second call skips every finished step; bad arguments are
# refused with exit 2 before any work.
set -e
src=$1; dml=$2; d=$3
rm -rf "$d"; mkdir -p "$d"
tiny="--config $src/configs/quick.json --set device=cpu --set model.embedding_dim=16
--set sampler.pairs_per_batch=8 --set sampler.max_batches_per_epoch=2 --set epochs=1
--set eval.max_images=100"
# shellcheck disable=SC2086
"$dml" train $tiny --set seed=1 --set output_dir="$d/a" > /dev/null 2>&1
# shellcheck disable=SC2086
"$dml" train $tiny --set seed=2 --set output_dir="$d/b" > /dev/null 2>&1
report() {
  "$src/tools/robustness_report.sh" "$d/a/model.safetensors" --out "$d/report" --name A \
    --dml "$dml" --device cpu --images 2 --restarts 1 --curve-images 0 --check-images 1 \
    --transfer-from B="$d/b/model.safetensors" \
    --data synthetic --root channels=1,size=28,classes=10,images=20
}
report > "$d/first.log" 2>&1 || { cat "$d/first.log"; exit 1; }
r="$d/report"
grep -q '"complete": true' "$r/worst-case.json"
grep -q '"profile": "rob28"' "$r/worst-case.json"
grep -q '"robrank_compat": true' "$r/worst-case.json"
# The restarts asked for (the tool's default is 3), read from the worst_case block itself: a
# bare grep would also match a robust fraction of 1.
test "$(grep -A1 '"worst_case": {' "$r/worst-case.json" | tail -n 1 | tr -d ' ')" = '"restarts":1,'
test ! -f "$r/curve28.json"
grep -q '"mode":"black-box"' "$r/nes-ca-plus.json"
grep -q '"attack":"QA:pm=+:M=1:eps=0.30196:alpha=0.011764:pgditer=32:nes=100"' "$r/nes-qa-plus.json"
grep -q '"queries_per_image":3200' "$r/nes-qa-plus.json"
grep -q '"images":1,' "$r/nes-qa-plus.json"
for kind in ca qa; do
  grep -q '"mode":"transfer","source_checkpoint":"'"$d"'/b/model.safetensors"' \
    "$r/transfer-from-B-$kind-plus.json"
  grep -q '"gradient_masking_suspected":' "$r/transfer-from-B-$kind-plus.json"
done
grep -q 'pgditer=32' "$r/transfer-from-B-ca-plus.json"
test -s "$r/robustness.svg"
grep -q "^done: $r" "$d/first.log"
report > "$d/second.log" 2>&1 || { cat "$d/second.log"; exit 1; }
test "$(grep -c "done, skipped" "$d/second.log")" = 5
refused() {  # refused MESSAGE ARGS...: exit 2, saying MESSAGE
  msg=$1
  shift
  status=0
  "$src/tools/robustness_report.sh" "$@" > "$d/refused.log" 2>&1 || status=$?
  test "$status" = 2 || { echo "exit $status for: $*"; cat "$d/refused.log"; exit 1; }
  grep -q "$msg" "$d/refused.log" || { echo "no '$msg' for: $*"; cat "$d/refused.log"; exit 1; }
}
refused "give --out DIR" "$d/a/model.safetensors" --dml "$dml"
refused "no checkpoint $d/none" "$d/none" --out "$d/x" --dml "$dml"
refused "wants NAME=CHECKPOINT" "$d/a/model.safetensors" --out "$d/x" --dml "$dml" --transfer-from B
refused "'two' is not a count" "$d/a/model.safetensors" --out "$d/x" --dml "$dml" --restarts two
test ! -d "$d/x"
echo "robustness report made"
