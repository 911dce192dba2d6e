#!/bin/sh
# `dml bench --train` on the CPU (tools/dml/bench_train.cpp): it times the steps of a tiny ACT run,
# reports the batch size and the passes per step, compares with the matching rows of a peer file
# and skips the others, writes its JSON, and turns bad options into exit code 2.
#   bench_train_test.sh DML WORKDIR CONFIG
set -u
dml=$1 dir=$2 config=$3
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# 8 pairs (16 images), D = 16, ACT with 2 PGD steps: 3 passes per step.
set -- --train "$config" --device cpu --set model.embedding_dim=16 --set sampler.pairs_per_batch=8 \
  --set defense.name=act --set defense.pgd.steps=2 --set defense.pgd.eps=0.3 \
  --set defense.pgd.alpha=0.15
# A peer file written by hand: one row for this run, one timed with another number of passes.
cat > "$dir/peer.json" <<JSON
{"peer": "Hand", "version": "0", "device": "cpu", "device_name": "test", "threads": 1,
 "overrides": ["defense.pgd.alpha=0.15", "defense.pgd.eps=0.3", "defense.pgd.steps=2",
               "defense.name=act", "sampler.pairs_per_batch=8", "model.embedding_dim=16"],
 "rows": [{"config": "quick.json", "variant": "slow", "images": 16, "passes": 3, "steps": 1,
           "warmup": 0, "ms": {"median": 1000000, "min": 1000000, "max": 1000000}},
          {"config": "quick.json", "variant": "eta-32", "images": 16, "passes": 33, "steps": 1,
           "warmup": 0, "ms": {"median": 5, "min": 5, "max": 5}}]}
JSON

# One thread, as the peer file says it used (CPU rows with another thread count are skipped).
OMP_NUM_THREADS=1 "$dml" bench "$@" --steps 2 --warmup 1 --peer "$dir/peer.json" \
  --json "$dir/out.json" > "$dir/stdout" 2> "$dir/stderr" ||
  { cat "$dir/stdout" "$dir/stderr"; fail "exit $?"; }
cat "$dir/stdout"
grep -q "^16 images and 3 forward/backward passes per step; median of 2 steps after 1 warm-up" \
  "$dir/stdout" || fail "batch and passes line"
grep -q "^ours (dml) " "$dir/stdout" || fail "no row for ours"
grep -Eq "^Hand 0 slow .* [0-9.]+x$" "$dir/stdout" || fail "no ratio for the matching peer row"
grep -q "eta-32" "$dir/stdout" && fail "the row with 33 passes was compared"
grep -q "(1 peer rows skipped" "$dir/stdout" || fail "skipped rows not reported"
# Three steps ran (1 warm-up + 2 timed); two step times in the JSON, one matched peer.
grep -q "stopped after 3 steps" "$dir/stderr" || fail "not 3 steps"
tr -d ' \n' < "$dir/out.json" > "$dir/flat.json"
grep -q '"passes":3,' "$dir/flat.json" || fail "JSON passes"
grep -q '"images":16,' "$dir/flat.json" || fail "JSON images"
grep -Eq '"step_ms":\[[0-9.e+-]+,[0-9.e+-]+\]' "$dir/flat.json" || fail "JSON step_ms"
grep -Eq '"peers":\[\{[^]]*"variant":"slow"' "$dir/flat.json" || fail "JSON peers"

expect_usage_error() {  # expect_usage_error MESSAGE ARGS...
  message=$1
  shift
  "$dml" bench "$@" > "$dir/err" 2>&1
  code=$?
  [ "$code" -eq 2 ] || { cat "$dir/err"; fail "exit $code, not 2, for: $*"; }
  grep -qF -- "$message" "$dir/err" || { cat "$dir/err"; fail "no '$message' for: $*"; }
}
expect_usage_error "--steps must be >= 1" --train "$config" --device cpu --steps 0
expect_usage_error "--peer: cannot open '$dir/none.json'" --train "$config" --device cpu \
  --peer "$dir/none.json"
echo '{"peer": "x"}' > "$dir/bad.json"
expect_usage_error "$dir/bad.json: missing key \"version\"" --train "$config" --device cpu \
  --peer "$dir/bad.json"
expect_usage_error "config key 'optimizer.lrr' is unknown" --train "$config" --set optimizer.lrr=1
# A run shorter than --warmup + --steps cannot be timed.
expect_usage_error "training ended after 2 steps, fewer than --warmup + --steps = 4" "$@" \
  --set sampler.max_batches_per_epoch=2 --set epochs=1 --set eval.max_images=50 --steps 3 \
  --warmup 1
echo "bench --train: timed, compared and checked"
