#!/usr/bin/env python3
"""Independent check of a C2F2 written by `dml train`: PyTorch reads its safetensors file (parsed
here from the format itself, section 6.1 of research/ecosystem.md) into torch.nn layers with
strict key and shape checking, embeds the same images, and must agree with `dml embed`.

    pytorch_embed_check.py WEIGHTS.safetensors IMAGES.npy DML_EMBEDDINGS.npy DIM

Exit 0 when they agree (max |difference| <= 1e-4 * max |embedding|: float32 sums in another
order), 1 when not. Used by tests/tools/pytorch_embed_test.sh."""
import json
import os
import struct
import sys

import numpy as np
import torch

# The network definition is the benchmark peer's (one C2F2 in Python, not two).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "peers"))
from pytorch_train_step import C2F2  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    body = data[8 + header_size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} has dtype {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype="<f4").reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return tensors


def main():
    weights, images, ours, dim = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = C2F2(dim)
    model.load_state_dict(read_safetensors(weights), strict=True)  # every key, every shape
    model.eval()
    with torch.no_grad():
        theirs = model(torch.from_numpy(np.load(images))).numpy()
    ours = np.load(ours)
    if ours.shape != theirs.shape:
        print(f"shapes differ: dml {ours.shape}, PyTorch {theirs.shape}")
        return 1
    difference = float(np.abs(ours - theirs).max())
    scale = float(np.abs(theirs).max())
    print(f"{ours.shape[0]} embeddings of dimension {ours.shape[1]}: max |dml - PyTorch| = "
          f"{difference:.3g}, max |embedding| = {scale:.3g}")
    if not difference <= 1e-4 * scale:
        print("dml and PyTorch disagree")
        return 1
    print("dml embed agrees with PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
