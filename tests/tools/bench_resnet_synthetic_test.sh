#!/bin/sh
# configs/bench/est-resnet18-224.json made TINY (32 x 32 synthetic images, 4 pairs, 1 PGD step):
# `dml bench --train` times it on the CPU, and a bad synthetic key is exit 2 naming it. Then, when
# a python has PyTorch (else this part is skipped, the test still passes), the PyTorch peer builds
# the same ResNet-18 and ResNet-50 and times P1 and P3 (CPU stand-in), and dml matches its rows.
#   bench_resnet_synthetic_test.sh DML WORKDIR SOURCE_DIR
set -u
dml=$1 dir=$2 src=$3
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
config="$src/configs/bench/est-resnet18-224.json"
set -- --set data.root=channels=3,size=32,classes=4,images=8 --set sampler.pairs_per_batch=4 \
  --set defense.pgd.steps=1 --set data.num_workers=1
OMP_NUM_THREADS=1 "$dml" bench --train "$config" "$@" --device cpu --steps 1 --warmup 0 \
  > "$dir/stdout" 2> "$dir/stderr" || { cat "$dir/stdout" "$dir/stderr"; fail "dml bench --train"; }
cat "$dir/stdout"
grep -Eq "^ours \(dml\) +[0-9.]+ " "$dir/stdout" || fail "no row for ours"
"$dml" bench --train "$config" --set data.root=colour=3 --device cpu --steps 1 --warmup 0 \
  > "$dir/bad" 2>&1
code=$?
if [ "$code" -ne 2 ] || ! grep -q "unknown data.root key 'colour'" "$dir/bad"; then
  cat "$dir/bad"
  fail "bad synthetic key: exit $code"
fi

torch_optional=1
. "$src/tests/tools/find_torch_python.sh"
if [ -z "$python" ]; then
  echo "bench resnet synthetic ok (the PyTorch peer part skipped: no PyTorch)"
  exit 0
fi
# Parameter counts with D = 512, worked from torchvision's published totals for D = 1000
# (models/resnet.h's table) less their fc (2048 e x 1000 + 1000) plus ours (512 e x 512 + 512):
#   ResNet-18: 11,689,512 - 513,000 + 262,656 = 11,439,168
#   ResNet-50: 25,557,032 - 2,049,000 + 1,049,088 = 24,557,120
counts=$(PYTHONPATH="$src/tools/peers" "$python" -c "
from peer_models import ResNet
print(*(sum(p.numel() for p in ResNet(n, 512).parameters()) for n in ('resnet18', 'resnet50')))")
[ "$counts" = "11439168 24557120" ] || fail "peer parameter counts: $counts"
# Ours, counted by dml info (the bench configs' model: D = 512, one BN branch).
for model in resnet18 resnet50; do
  "$dml" info --model "$model" --embedding-dim 512 > "$dir/info-$model" 2>&1 ||
    { cat "$dir/info-$model"; fail "dml info $model"; }
done
grep -q "11,439,168\|11439168" "$dir/info-resnet18" || { cat "$dir/info-resnet18"; fail "ours 18"; }
grep -q "24,557,120\|24557120" "$dir/info-resnet50" || { cat "$dir/info-resnet50"; fail "ours 50"; }

"$python" "$src/tools/peers/pytorch_train_step.py" --config "$config" "$@" --device cpu \
  --steps 1 --warmup 0 --threads 1 --variants p1,p3 --p3-stand-in --out "$dir/peer.json" \
  2> "$dir/peer.log" || { cat "$dir/peer.log"; fail "the peer (ResNet-18) failed"; }
OMP_NUM_THREADS=1 "$dml" bench --train "$config" "$@" --device cpu --steps 1 --warmup 0 \
  --peer "$dir/peer.json" > "$dir/stdout2" 2>&1 || { cat "$dir/stdout2"; fail "dml with peer"; }
cat "$dir/stdout2"
grep -Eq "^PyTorch .* P1 best eager .* [0-9.]+x$" "$dir/stdout2" || fail "no P1 row"
grep -Eq "^PyTorch .* P3 torch.cuda.graph \(CPU stand-in\) .* [0-9.]+x$" "$dir/stdout2" ||
  fail "no P3 row"
grep -q "skipped" "$dir/stdout2" && fail "a peer row did not match"
"$python" "$src/tools/peers/pytorch_train_step.py" \
  --config "$src/configs/bench/est-resnet50-224.json" "$@" --device cpu --steps 1 --warmup 0 \
  --threads 1 --variants p1 --out "$dir/peer50.json" 2> "$dir/peer50.log" ||
  { cat "$dir/peer50.log"; fail "the peer (ResNet-50) failed"; }
# What the peer does not implement is refused, naming the key.
"$python" "$src/tools/peers/pytorch_train_step.py" --config "$config" \
  --set model.pretrained=w.safetensors --out "$dir/x.json" > "$dir/err" 2>&1
code=$?
if [ "$code" -ne 2 ] || ! grep -q "config key 'model.pretrained'" "$dir/err"; then
  cat "$dir/err"
  fail "pretrained: exit $code"
fi
"$python" "$src/tools/peers/pytorch_train_step.py" --config "$config" --set model.name=resnet34 \
  --out "$dir/x.json" > "$dir/err" 2>&1
code=$?
[ "$code" -eq 2 ] && grep -q "config key 'model.name'" "$dir/err" || fail "resnet34: exit $code"
"$python" "$src/tools/peers/pytorch_train_step.py" --config "$config" --set data.root=colour=3 \
  --out "$dir/x.json" > "$dir/err" 2>&1
code=$?
[ "$code" -eq 2 ] && grep -q "config key 'data.root'" "$dir/err" || fail "colour: exit $code"
echo "bench resnet synthetic ok (with the PyTorch peer)"
