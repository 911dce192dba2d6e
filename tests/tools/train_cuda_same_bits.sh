#!/bin/sh
# usage: train_cuda_same_bits.sh DML DIR ARGS...
# `dml train --device cuda` gives the same bits every time: a second run, and a run stopped after
# 3 steps and resumed, end with the first run's weights and metrics byte for byte. The CUDA
# kernels add floats in a fixed order (no floating-point atomics; index_select's backward sorts
# its rows, kernels/index_select/index_select_cuda.cu), cuDNN is not used unless asked for, and
# the checkpoint holds every state on the device. With ACT's PGD inside the step, where a
# last-bit difference would flip a sign and change the adversary.
# On the CPU emulator (dml_emulated) this checks the CUDA path's checkpoint and resume; only a
# GPU can show run-to-run determinism, since the emulator runs blocks in a fixed order.
set -e
dml=$1; d=$2; shift 2
if ! "$dml" --version | grep -q "GPUs visible: [1-9]"; then
  echo "skipped: no CUDA device"
  exit 0
fi
rm -rf "$d"; mkdir -p "$d"
train() {
  out=$1; shift
  if ! "$dml" train "$@" --set device=cuda --set output_dir="$d/$out" >> "$d/$out.log" 2>&1; then
    cat "$d/$out.log"; exit 1
  fi
}
train first "$@"
train second "$@"
train resumed "$@" --stop-after-batches 3
test ! -e "$d/resumed/model.safetensors"
train resumed "$@" --resume
for run in second resumed; do
  cmp "$d/first/model.safetensors" "$d/$run/model.safetensors"
  cmp "$d/first/metrics.json" "$d/$run/metrics.json"
done
echo "cuda training same bits"
