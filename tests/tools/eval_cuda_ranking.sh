#!/bin/sh
# usage: eval_cuda_ranking.sh DML DIR TRAIN_ARGS...
# `dml eval --device cuda` ranks on the GPU (metrics/retrieval.h's GPU path; before, every evaluation
# ranked on the CPU whatever the device) and scores what the CPU scores: a tiny model trained on
# the CPU, evaluated on 100 test images on each device; the CUDA run says where it ranked and its
# recall@k, mAP, mAP@R and MRR equal the CPU run's to 1e-6 (the embeddings of the two devices may
# differ in the last bits, which can reorder two equidistant neighbours but not move a mean by
# more than that on this model; NMI and pi_ratio are left out: k-means on two inputs that differ in
# the last bits may take another path). On the emulator (dml_emulated) this runs the CUDA ranking
# kernels on the CPU.
set -e
dml=$1; d=$2; shift 2
if ! "$dml" --version | grep -q "GPUs visible: [1-9]"; then
  echo "skipped: no CUDA device"
  exit 0
fi
rm -rf "$d"; mkdir -p "$d"
"$dml" train "$@" --set output_dir="$d/run" > "$d/train.log" 2>&1 || { cat "$d/train.log"; exit 1; }
m=$d/run/model.safetensors
"$dml" eval --checkpoint "$m" --device cpu --max-images 100 --json > "$d/cpu.json"
"$dml" eval --checkpoint "$m" --device cuda --max-images 100 --json > "$d/cuda.json"
"$dml" eval --checkpoint "$m" --device cuda --max-images 100 > "$d/cuda.txt"
grep -q "^ranking     on cuda:0, " "$d/cuda.txt" || { cat "$d/cuda.txt"; exit 1; }
"$dml" eval --checkpoint "$m" --device cpu --max-images 100 > "$d/cpu.txt"
grep -q "^ranking     on cpu, " "$d/cpu.txt" || { cat "$d/cpu.txt"; exit 1; }
for key in recall@1 recall@2 recall@4 map map_at_r mrr; do
  a=$(sed -n "s/.*\"$key\":\([-0-9.e]*\).*/\1/p" "$d/cpu.json")
  b=$(sed -n "s/.*\"$key\":\([-0-9.e]*\).*/\1/p" "$d/cuda.json")
  [ -n "$a" ] && [ -n "$b" ] || { echo "no $key in the JSON"; exit 1; }
  awk -v a="$a" -v b="$b" -v k="$key" \
    'BEGIN { if ((a - b) > 1e-6 || (b - a) > 1e-6) { print k ": cpu " a ", cuda " b; exit 1 } }'
done
echo "eval ranks on cuda"
