#!/bin/sh
# usage: eval_images.sh DML DIR ARGS...   (ARGS: a tiny `dml train` run)
# `dml eval --images FILE` scores the split with its images replaced by FILE's rows, labels kept
# (MDProp's evaluation of an adversarial set). Checked against two other routes to the same
# numbers: the split's own pixels (an attack with eps 0 saves them) give the plain evaluation's
# JSON byte for byte, and an adversarial set gives what `dml embed --input` + `dml metrics` give
# on the same images and labels. Bad files are refused with the rule of every input option.
set -e
dml=$1; d=$2; shift 2
rm -rf "$d"; mkdir -p "$d"
"$dml" train "$@" --set output_dir="$d/run" > /dev/null 2>&1
m=$d/run/model.safetensors
# A 100-image split of 28 x 28 x 1 images, so every route sees the whole split.
split="--data synthetic --root channels=1,size=28,classes=10,images=100 --device cpu"
"$dml" attack --checkpoint "$m" $split --attack STAX:eps=0:alpha=0:pgditer=1 \
  --save-adversarial "$d/clean.npy" > /dev/null
"$dml" eval --checkpoint "$m" $split --json > "$d/plain.json"
"$dml" eval --checkpoint "$m" $split --images "$d/clean.npy" --json > "$d/clean.json"
cmp "$d/plain.json" "$d/clean.json"

"$dml" attack --checkpoint "$m" $split --attack STAX:eps=0.3:alpha=0.1:pgditer=3 \
  --save-adversarial "$d/adv.npy" > /dev/null
"$dml" eval --checkpoint "$m" $split --images "$d/adv.npy" --json > "$d/adv.json"
"$dml" embed --model c2f2 --embedding-dim 16 --weights "$m" --input "$d/adv.npy" \
  --out "$d/adv-emb.npy" --device cpu 2> /dev/null
"$dml" embed --model c2f2 --embedding-dim 16 --weights "$m" $split --out "$d/emb.npy" \
  --labels-out "$d/labels.npy" 2> /dev/null
"$dml" metrics --embeddings "$d/adv-emb.npy" --labels "$d/labels.npy" --json > "$d/oracle.json"
cmp "$d/adv.json" "$d/oracle.json"
if cmp -s "$d/adv.json" "$d/plain.json"; then echo "the attack changed no metric"; exit 1; fi

expect() {  # expect CODE TEXT ARGS...: dml eval exits CODE and says TEXT
  want=$1; text=$2; shift 2
  status=0; "$dml" eval --checkpoint "$m" $split "$@" > "$d/out.txt" 2>&1 || status=$?
  cat "$d/out.txt"
  test "$status" -eq "$want"
  grep -qF -e "$text" "$d/out.txt"
}
expect 1 "adv-emb.npy: expected images of synthetic, [N, 1, 28, 28], got f32[100, 16]" \
  --images "$d/adv-emb.npy"
expect 1 "adv.npy: holds 100 images where the synthetic test evaluation takes 40 (the split's" \
  --images "$d/adv.npy" --max-images 40
expect 1 "labels.npy: holds integers" --images "$d/labels.npy"
expect 2 "--images $d/none.npy: no such file" --images "$d/none.npy"
echo "eval --images agrees"
