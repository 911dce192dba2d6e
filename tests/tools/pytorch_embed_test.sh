#!/bin/sh
# A C2F2 trained by `dml train` for a few steps loads into PyTorch (torch.nn layers, strict key and
# shape check) and PyTorch's embeddings of random images equal `dml embed`'s
# (tests/tools/pytorch_embed_check.py): our weights load in PyTorch. Exit 77 (CTest:
# skipped) when no python here has PyTorch and numpy (tools/peers/install.sh installs them).
#   pytorch_embed_test.sh DML WORKDIR SOURCE_DIR
set -u
dml=$1 dir=$2 src=$3
. "$src/tests/tools/find_torch_python.sh"
. "$src/tests/tools/tiny_c2f2_run.sh"
"$python" -c "
import numpy as np
np.save('$dir/images.npy', np.random.default_rng(7).random((13, 1, 28, 28), dtype=np.float32))
" || exit 1
"$dml" embed --model c2f2 --embedding-dim 24 --weights "$dir/run/model.safetensors" \
  --input "$dir/images.npy" --out "$dir/dml.npy" --device cpu || { echo "FAIL: dml embed"; exit 1; }
"$python" "$src/tests/tools/pytorch_embed_check.py" "$dir/run/model.safetensors" \
  "$dir/images.npy" "$dir/dml.npy" 24
