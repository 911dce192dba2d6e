#!/bin/sh
# train.micro_batches (tools/dml/data_parallel.h): 1, set or left out, gives the same bytes (the
# step of every run before the key existed); 2 cuts each batch in two halves, mined and
# normalized alone, and gives other weights, which a run stopped after 3 steps and resumed
# reproduces bit for bit (each micro-batch's mining range is a function of the step); a batch
# that the micro-batches do not divide is refused (exit 2) naming the key.
# Usage: train_micro_batches.sh DML WORK_DIR TRAIN_ARGS...  (TRAIN_ARGS: 8 pairs per batch)
dml=$1 dir=$2
shift 2
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; cat "$dir/log"; exit 1; }
train() { "$dml" train "$@" > "$dir/log" 2>&1 || fail "dml train $*"; }
train "$@" --set output_dir="$dir/default"
train "$@" --set train.micro_batches=1 --set output_dir="$dir/one"
cmp "$dir/default/model.safetensors" "$dir/one/model.safetensors" || fail "micro_batches 1 differs"
cmp "$dir/default/metrics.json" "$dir/one/metrics.json" || fail "micro_batches 1: metrics differ"
train "$@" --set train.micro_batches=2 --set output_dir="$dir/two"
cmp -s "$dir/default/model.safetensors" "$dir/two/model.safetensors" &&
  fail "micro_batches 2 gave the weights of one batch"
train "$@" --set train.micro_batches=2 --set output_dir="$dir/resumed" --stop-after-batches 3
train "$@" --set train.micro_batches=2 --set output_dir="$dir/resumed" --resume
cmp "$dir/two/model.safetensors" "$dir/resumed/model.safetensors" || fail "resumed weights differ"
cmp "$dir/two/metrics.json" "$dir/resumed/metrics.json" || fail "resumed metrics differ"
"$dml" train "$@" --set train.micro_batches=3 --set output_dir="$dir/three" > "$dir/log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "8 pairs in 3 micro-batches: exit $rc, not 2"
grep -q "config key 'sampler.pairs_per_batch' (8 pairs, the global batch) does not divide by the train.micro_batches 3 x 1 rank = 3 micro-batches per step" \
  "$dir/log" || fail "no message naming the key"
echo "micro batches ok"
