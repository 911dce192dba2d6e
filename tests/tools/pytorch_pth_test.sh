#!/bin/sh
# dml reads what a real torch.save writes (engine/io/pth.h; the unit tests' fixtures are written
# without PyTorch): a C2F2 trained by `dml train` for a few steps is saved by PyTorch as a plain
# state dict, as a {"state_dict": ...} checkpoint with DataParallel's "module." prefix, and with
# its 2-D weights as transposed (strided) views; `dml embed --weights FILE.pth` then gives the same
# bytes as from the safetensors file. The legacy format (_use_new_zipfile_serialization=False) is
# refused by name. Exit 77 (CTest: skipped) without PyTorch and numpy (tools/peers/install.sh).
#   pytorch_pth_test.sh DML WORKDIR SOURCE_DIR
set -u
dml=$1 dir=$2 src=$3
. "$src/tests/tools/find_torch_python.sh"
. "$src/tests/tools/tiny_c2f2_run.sh"
PYTHONPATH="$src/tests/tools" "$python" -c "
import numpy as np, torch
from pytorch_embed_check import read_safetensors
sd = read_safetensors('$dir/run/model.safetensors')
torch.save(sd, '$dir/plain.pth')
torch.save({'epoch': 3, 'state_dict': {'module.' + k: v for k, v in sd.items()}}, '$dir/nested.pth')
strided = {k: v.t().contiguous().t() if v.dim() == 2 else v for k, v in sd.items()}
assert not all(v.is_contiguous() for v in strided.values())
torch.save(strided, '$dir/strided.pth')
torch.save(sd, '$dir/legacy.pth', _use_new_zipfile_serialization=False)
np.save('$dir/images.npy', np.random.default_rng(7).random((13, 1, 28, 28), dtype=np.float32))
" || { echo "FAIL: writing the .pth files"; exit 1; }
embed() {  # embed WEIGHTS OUT
  "$dml" embed --model c2f2 --embedding-dim 24 --weights "$1" --input "$dir/images.npy" \
    --out "$2" --device cpu > "$dir/embed.log" 2>&1
}
embed "$dir/run/model.safetensors" "$dir/reference.npy" || { cat "$dir/embed.log"; exit 1; }
for name in plain nested strided; do
  embed "$dir/$name.pth" "$dir/$name.npy" || { cat "$dir/embed.log"; echo "FAIL: $name.pth"; exit 1; }
  cmp "$dir/reference.npy" "$dir/$name.npy" || { echo "FAIL: $name.pth gives other embeddings"; exit 1; }
done
if embed "$dir/legacy.pth" "$dir/legacy.npy"; then echo "FAIL: the legacy format was read"; exit 1; fi
grep -q "legacy torch.save format" "$dir/embed.log" || { cat "$dir/embed.log"; exit 1; }
echo "dml reads torch.save's files"
