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

grep -q '"precision":"fp32",' "$dir/flat.json" || fail "JSON precision"
grep -q "^dml bench --train .*: cpu (1 threads), precision fp32, commit " "$dir/stdout" ||
  fail "header without the precision"

# Precision: --precision tf32 (dml's option, which wins over the config key) compares the rows of
# a tf32 peer file, P3 among them, and those in PyTorch's default precision (labelled), not the
# strict FP32 rows of peer.json. The P3 row is as tools/peers/pytorch_train_step.py writes it.
cat > "$dir/peer-tf32.json" <<JSON
{"peer": "Hand", "version": "0", "device": "cpu", "device_name": "test", "threads": 1,
 "precision": "tf32",
 "overrides": ["defense.pgd.alpha=0.15", "defense.pgd.eps=0.3", "defense.pgd.steps=2",
               "defense.name=act", "sampler.pairs_per_batch=8", "model.embedding_dim=16"],
 "rows": [{"config": "quick.json", "variant": "P1 best eager", "images": 16, "passes": 3,
           "steps": 1, "warmup": 0, "ms": {"median": 900000, "min": 900000, "max": 900000}},
          {"config": "quick.json", "variant": "P3 torch.cuda.graph", "images": 16, "passes": 3,
           "steps": 1, "warmup": 0, "ms": {"median": 800000, "min": 800000, "max": 800000},
           "p3": {"chosen": "torch.cuda.graph",
                  "candidates": {"torch.cuda.graph": {"ms": {"median": 800000}},
                                 "compile reduce-overhead": {"error": "failed"}}}}]}
JSON
sed -e 's/"tf32"/"pytorch-default"/' -e 's/P1 best eager/P1 default/' \
  -e 's/P3 torch.cuda.graph/P3 default/g' "$dir/peer-tf32.json" > "$dir/peer-default.json"
OMP_NUM_THREADS=1 "$dml" bench "$@" --precision tf32 --steps 1 --warmup 0 \
  --peer "$dir/peer.json" --peer "$dir/peer-tf32.json" --peer "$dir/peer-default.json" \
  --json "$dir/tf32.json" > "$dir/stdout-tf32" 2> "$dir/stderr-tf32" ||
  { cat "$dir/stdout-tf32" "$dir/stderr-tf32"; fail "--precision tf32: exit $?"; }
cat "$dir/stdout-tf32"
grep -Eq "^Hand 0 P1 best eager .* [0-9.]+x$" "$dir/stdout-tf32" || fail "no tf32 P1 row"
grep -Eq "^Hand 0 P3 torch.cuda.graph .* [0-9.]+x$" "$dir/stdout-tf32" || fail "no tf32 P3 row"
grep -Eq "^Hand 0 P3 default \[pytorch-default\] .* [0-9.]+x$" "$dir/stdout-tf32" ||
  fail "no labelled pytorch-default P3 row"
grep -q "slow" "$dir/stdout-tf32" && fail "a strict FP32 peer row compared with our tf32 run"
grep -q "(2 peer rows skipped" "$dir/stdout-tf32" || fail "fp32 rows not skipped"
tr -d ' \n' < "$dir/tf32.json" > "$dir/flat-tf32.json"
grep -q '"precision":"tf32",' "$dir/flat-tf32.json" || fail "JSON: our precision"
grep -q '"precision":"pytorch-default","ratio_peer_over_ours"' "$dir/flat-tf32.json" ||
  fail "JSON: the peer's precision"

expect_usage_error() {  # expect_usage_error MESSAGE ARGS...
  message=$1
  shift
  "$dml" bench "$@" > "$dir/err" 2>&1
  code=$?
  [ "$code" -eq 2 ] || { cat "$dir/err"; fail "exit $code, not 2, for: $*"; }
  grep -qF -- "$message" "$dir/err" || { cat "$dir/err"; fail "no '$message' for: $*"; }
}
expect_usage_error "--steps must be >= 1" --train "$config" --device cpu --steps 0
# An existing --json is refused before any step (tools/dml/output_files.h), kept, and replaced
# with --overwrite.
cp "$dir/out.json" "$dir/kept.json"
expect_usage_error "--overwrite" "$@" --steps 2 --warmup 1 --json "$dir/out.json"
cmp "$dir/kept.json" "$dir/out.json" || fail "the existing --json was changed"
grep -q "stopped after" "$dir/err" && fail "steps ran before the --json refusal"
"$dml" bench "$@" --steps 1 --warmup 0 --json "$dir/out.json" --overwrite > /dev/null 2>&1 ||
  fail "--overwrite refused"
cmp -s "$dir/kept.json" "$dir/out.json" && fail "--overwrite kept the old file"
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
