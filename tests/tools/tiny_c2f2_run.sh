# shellcheck shell=sh
# Sourced by the PyTorch tests after find_torch_python.sh: trains a tiny C2F2 (D = 24, 3 batches
# of 8 pairs) into $dir/run with $dml and $src set, or fails the test with the training log.
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$dml" train --config "$src/configs/quick.json" --set device=cpu --set model.embedding_dim=24 \
  --set sampler.pairs_per_batch=8 --set sampler.max_batches_per_epoch=3 --set epochs=1 \
  --set eval.max_images=50 --set output_dir="$dir/run" > "$dir/train.log" 2>&1 ||
  { cat "$dir/train.log"; echo "FAIL: dml train"; exit 1; }
