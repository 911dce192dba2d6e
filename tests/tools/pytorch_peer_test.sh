#!/bin/sh
# The PyTorch peer (tools/peers/pytorch_train_step.py) and `dml bench --train` agree on what they
# compare: the peer times a tiny EST run of quick.json in its two styles on the CPU, and dml
# matches both rows to its own run of the same config (file, device, batch size, passes).
# Exit 77 (CTest: skipped) when no python on this machine has PyTorch (tools/peers/install.sh).
#   pytorch_peer_test.sh DML WORKDIR SOURCE_DIR
set -u
dml=$1 dir=$2 src=$3
. "$src/tests/tools/find_torch_python.sh"
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
set -- --set model.embedding_dim=16 --set sampler.pairs_per_batch=8 --set defense.name=est \
  --set defense.pgd.steps=2 --set defense.pgd.eps=0.3 --set defense.pgd.alpha=0.15
"$python" "$src/tools/peers/pytorch_train_step.py" --config "$src/configs/quick.json" "$@" \
  --device cpu --steps 2 --warmup 1 --threads 1 --out "$dir/peer.json" 2> "$dir/peer.log" ||
  { cat "$dir/peer.log"; fail "the peer failed"; }
# One thread on both sides: rows timed with another thread count than ours are not compared.
OMP_NUM_THREADS=1 "$dml" bench --train "$src/configs/quick.json" "$@" --device cpu --steps 2 \
  --warmup 1 --peer "$dir/peer.json" > "$dir/stdout" 2> "$dir/stderr" ||
  { cat "$dir/stdout" "$dir/stderr"; fail "dml bench --train failed"; }
cat "$dir/stdout"
grep -Eq "^PyTorch .* P0 robrank as-is .* [0-9.]+x$" "$dir/stdout" || fail "no P0 row"
grep -Eq "^PyTorch .* P1 best eager .* [0-9.]+x$" "$dir/stdout" || fail "no P1 row"
grep -q "skipped" "$dir/stdout" && fail "a peer row did not match"
# The same peer file against a run on two threads, or without the peer's --set overrides: both
# rows are skipped, not compared.
OMP_NUM_THREADS=2 "$dml" bench --train "$src/configs/quick.json" "$@" --device cpu --steps 1 \
  --warmup 0 --peer "$dir/peer.json" > "$dir/stdout2" 2>&1 || fail "dml bench (2 threads) failed"
grep -q "(2 peer rows skipped" "$dir/stdout2" || { cat "$dir/stdout2"; fail "2 threads compared"; }
OMP_NUM_THREADS=1 "$dml" bench --train "$src/configs/quick.json" --set model.embedding_dim=16 \
  --set sampler.pairs_per_batch=8 --set defense.name=est --set defense.pgd.steps=2 \
  --set defense.pgd.alpha=0.15 --set defense.pgd.eps=0.25 --device cpu --steps 1 --warmup 0 \
  --peer "$dir/peer.json" > "$dir/stdout3" 2>&1 || fail "dml bench (other eps) failed"
grep -q "(2 peer rows skipped" "$dir/stdout3" || { cat "$dir/stdout3"; fail "other eps compared"; }
# A config the peer does not implement is refused with the key named.
"$python" "$src/tools/peers/pytorch_train_step.py" --config "$src/configs/quick.json" \
  --set loss.miner=semihard --out "$dir/x.json" > "$dir/err" 2>&1
code=$?
if [ "$code" -ne 2 ] || ! grep -q "config key 'loss.miner' is 'semihard'" "$dir/err"; then
  cat "$dir/err"
  fail "semihard: exit $code"
fi
echo "pytorch peer: both styles timed and compared"
