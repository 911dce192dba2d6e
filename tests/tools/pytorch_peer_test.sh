#!/bin/sh
# The PyTorch peer (tools/peers/pytorch_train_step.py) and `dml bench --train` agree on what they
# compare: the peer times a tiny EST run of quick.json in its styles on the CPU (P3 with its CPU
# stand-in for the CUDA graph, after its check against P1), and dml matches the rows to its own
# run of the same config (file, device, batch size, passes, precision).
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
  --device cpu --steps 2 --warmup 1 --threads 1 --variants p0,p1,p3 --p3-stand-in \
  --out "$dir/peer.json" 2> "$dir/peer.log" ||
  { cat "$dir/peer.log"; fail "the peer failed"; }
# One thread on both sides: rows timed with another thread count than ours are not compared.
OMP_NUM_THREADS=1 "$dml" bench --train "$src/configs/quick.json" "$@" --device cpu --steps 2 \
  --warmup 1 --peer "$dir/peer.json" > "$dir/stdout" 2> "$dir/stderr" ||
  { cat "$dir/stdout" "$dir/stderr"; fail "dml bench --train failed"; }
cat "$dir/stdout"
grep -Eq "^PyTorch .* P0 robrank as-is .* [0-9.]+x$" "$dir/stdout" || fail "no P0 row"
grep -Eq "^PyTorch .* P1 best eager .* [0-9.]+x$" "$dir/stdout" || fail "no P1 row"
grep -Eq "^PyTorch .* P3 torch.cuda.graph \(CPU stand-in\) .* [0-9.]+x$" "$dir/stdout" ||
  fail "no P3 row"
grep -q "skipped" "$dir/stdout" && fail "a peer row did not match"
tr -d ' \n' < "$dir/peer.json" > "$dir/flat.json"
grep -q '"precision":"fp32",' "$dir/flat.json" || fail "the peer file's precision"
grep -q '"objective_relative_difference":0.0,"in_box":true,"passed":true' "$dir/flat.json" ||
  fail "P3's check against P1 (the stand-in runs P1's kernels: equal)"
# The same peer file against a run on two threads, or without the peer's --set overrides: all
# rows are skipped, not compared.
OMP_NUM_THREADS=2 "$dml" bench --train "$src/configs/quick.json" "$@" --device cpu --steps 1 \
  --warmup 0 --peer "$dir/peer.json" > "$dir/stdout2" 2>&1 || fail "dml bench (2 threads) failed"
grep -q "(3 peer rows skipped" "$dir/stdout2" || { cat "$dir/stdout2"; fail "2 threads compared"; }
OMP_NUM_THREADS=1 "$dml" bench --train "$src/configs/quick.json" --set model.embedding_dim=16 \
  --set sampler.pairs_per_batch=8 --set defense.name=est --set defense.pgd.steps=2 \
  --set defense.pgd.alpha=0.15 --set defense.pgd.eps=0.25 --device cpu --steps 1 --warmup 0 \
  --peer "$dir/peer.json" > "$dir/stdout3" 2>&1 || fail "dml bench (other eps) failed"
grep -q "(3 peer rows skipped" "$dir/stdout3" || { cat "$dir/stdout3"; fail "other eps compared"; }
# A config the peer does not implement is refused with the key named.
"$python" "$src/tools/peers/pytorch_train_step.py" --config "$src/configs/quick.json" \
  --set loss.miner=semihard --out "$dir/x.json" > "$dir/err" 2>&1
code=$?
if [ "$code" -ne 2 ] || ! grep -q "config key 'loss.miner' is 'semihard'" "$dir/err"; then
  cat "$dir/err"
  fail "semihard: exit $code"
fi
# Without the stand-in, P3 on the CPU is skipped with the reason.
"$python" "$src/tools/peers/pytorch_train_step.py" --config "$src/configs/quick.json" "$@" \
  --device cpu --steps 1 --warmup 0 --threads 1 --variants p3 --out "$dir/p3.json" \
  > "$dir/p3.log" 2>&1 || { cat "$dir/p3.log"; fail "P3 on the CPU failed"; }
grep -q "P3 skipped: it captures CUDA graphs" "$dir/p3.log" || { cat "$dir/p3.log"; fail "P3 ran"; }
echo "pytorch peer: every style timed and compared"
