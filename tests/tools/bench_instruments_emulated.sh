#!/bin/sh
# `dml bench --train --profile` on the emulated CUDA kernels (dml_emulated): the instruments of a
# tiny C2F2 EST step (4 pairs = 8 images, D = 16, 2 PGD steps). Checks: the kernel launches of
# the two timed steps are positive and the same; no cudaMalloc in a step after the two warm-up
# steps (the caching allocator serves every tensor; the second step still allocates: Adam's
# state and the parameters' gradients, made in the first step and kept, hold blocks that the
# first step's temporaries had been given, 14 cudaMallocs with Adam and 3 with plain SGD);
# the profile has one row per kernel of the attack pass; the conv and matmul rows carry the
# FLOPs counted by hand:
#   conv1 fprop  2 N K P Q C R S = 2*8*32*28*28*1*25  =  10,035,200
#   conv2 fprop                  = 2*8*64*14*14*32*25 = 160,563,200
#   fc1 (x W^T and its input gradient) 2 m n k = 2*8*1024*3136 = 51,380,224
#   fc2                                        = 2*8*16*1024   =    262,144
#   bench_instruments_emulated.sh DML_EMULATED WORKDIR CONFIG
set -u
dml=$1 dir=$2 config=$3
rm -rf "$dir" && mkdir -p "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
"$dml" bench --train "$config" --device cuda --set model.embedding_dim=16 \
  --set sampler.pairs_per_batch=4 --set defense.name=est --set defense.pgd.steps=2 \
  --set defense.pgd.eps=0.3 --set defense.pgd.alpha=0.15 --steps 2 --warmup 2 --profile \
  --json "$dir/out.json" > "$dir/stdout" 2> "$dir/stderr" ||
  { cat "$dir/stdout" "$dir/stderr"; fail "exit $?"; }
cat "$dir/stdout"
tr -d ' \n' < "$dir/out.json" > "$dir/flat.json"

# Two timed steps with the same positive count: min = max.
launches=$(sed -n 's/.*"kernel_launches_per_step":{"max":\([0-9]*\),"min":\([0-9]*\)}.*/\1 \2/p' \
  "$dir/flat.json")
set -- $launches
[ $# -eq 2 ] || fail "no kernel_launches_per_step in the JSON"
[ "$1" -gt 0 ] && [ "$1" -eq "$2" ] || fail "launches per step: max $1, min $2"
grep -q '"device_allocations_per_step":0,' "$dir/flat.json" || fail "cudaMalloc after warm-up"
# The profile: one row per kernel of the pass (no library calls here: our GEMMs are the default).
per_pass=$(sed -n 's/.*"kernel_launches_per_attack_pass":\([0-9]*\),.*/\1/p' "$dir/flat.json")
[ -n "$per_pass" ] && [ "$per_pass" -gt 0 ] || fail "no launches per attack pass"
grep -q "^profile of attack pass 2 of 2:" "$dir/stdout" || fail "not the second attack pass"
grep -q "^$per_pass kernels, 0 library calls, " "$dir/stdout" || fail "profile rows != $per_pass"
rows=$(grep -o '"kernel":"' "$dir/flat.json" | wc -l)
[ "$rows" -eq "$per_pass" ] || fail "$rows profile rows in the JSON, $per_pass launches"
# Rows of the pass with their hand-counted FLOPs (JSON keys are sorted: flops before kernel).
has_row() {  # has_row KERNEL FLOPS
  grep -Eq "\"flops\":$2\.0,[^}]*\"kernel\":\"$1\"" "$dir/flat.json" || fail "no $1 row with $2 FLOPs"
}
has_row conv2d_fprop 10035200
has_row conv2d_fprop 160563200
has_row matmul 51380224
has_row matmul 262144
grep -q '"kernel":"pgd_step"' "$dir/flat.json" || fail "no pgd_step row"
echo "bench --train instruments: counted, steady and profiled"
