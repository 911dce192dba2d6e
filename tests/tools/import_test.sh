#!/bin/sh
# usage: import_test.sh DML DIR TRAIN_ARGS...
# dml import writes bare weights as a model file that --checkpoint reads: the weights of a tiny
# trained model, imported, give `dml eval` the same JSON as the model itself, and the text names
# the data and metric given; bad options are usage errors (2), weights that do not fit the model
# or the layout runtime errors (1) naming the file, and an existing --out is kept unless
# --overwrite.
set -e
dml=$1; d=$2; shift 2
rm -rf "$d"; mkdir -p "$d"
"$dml" train "$@" --set output_dir="$d/run" > "$d/train.log" 2>&1 || { cat "$d/train.log"; exit 1; }
w=$d/run/model.safetensors
imp() { "$dml" import --model c2f2 --embedding-dim 16 --weights "$w" --data fashion-mnist "$@"; }
imp --out "$d/imported.safetensors" --metric N --trained-precision tf32 > "$d/import.log"
grep -q "^wrote $d/imported.safetensors: c2f2, D = 16, 1 BN branch(es), from $w (dml names), for fashion-mnist, metric N$" "$d/import.log" || { cat "$d/import.log"; exit 1; }
"$dml" eval --checkpoint "$w" --device cpu --max-images 100 --json > "$d/model.json"
"$dml" eval --checkpoint "$d/imported.safetensors" --device cpu --max-images 100 --json > "$d/imported.json"
cmp "$d/model.json" "$d/imported.json"
"$dml" eval --checkpoint "$d/imported.safetensors" --device cpu --max-images 100 > "$d/imported.txt" \
  2> "$d/imported.err"
grep -q "^eval: 100/100 images$" "$d/imported.err"  # the progress line (not a terminal: lines)
grep -q "trained in tf32" "$d/imported.txt"
grep -q "fashion-mnist test: 100 images in 10 classes, metric N" "$d/imported.txt"
expect() {  # expect CODE TEXT COMMAND...: exit status CODE and TEXT on stderr
  code=$1; text=$2; shift 2
  set +e; "$@" > "$d/out.log" 2> "$d/err.log"; got=$?; set -e
  if [ "$got" != "$code" ] || ! grep -qF -- "$text" "$d/err.log"; then
    echo "expected exit $code and '$text' from: $*"; echo "got $got:"; cat "$d/err.log"; exit 1
  fi
}
cp "$d/imported.safetensors" "$d/kept.safetensors"
expect 2 "--overwrite" imp --out "$d/imported.safetensors"
cmp "$d/kept.safetensors" "$d/imported.safetensors"
imp --out "$d/imported.safetensors" --overwrite > /dev/null
expect 2 "unknown model 'c3f3'" "$dml" import --model c3f3 --embedding-dim 16 --weights "$w" \
  --data fashion-mnist --out "$d/x.safetensors"
expect 2 "unknown data set 'fashion'" "$dml" import --model c2f2 --embedding-dim 16 --weights "$w" \
  --data fashion --out "$d/x.safetensors"
expect 2 "--layout" imp --layout torch --out "$d/x.safetensors"
expect 2 "--out" imp --out "$w"
expect 2 "--weights" "$dml" import --model c2f2 --embedding-dim 16 --weights "$d/absent.pth" \
  --data fashion-mnist --out "$d/x.safetensors"
expect 1 "no backbone.* entry" imp --layout robrank --out "$d/x.safetensors"
expect 1 "$w" "$dml" import --model c2f2 --embedding-dim 32 --weights "$w" --data fashion-mnist \
  --out "$d/x.safetensors"
test ! -e "$d/x.safetensors"
echo "import ok"
