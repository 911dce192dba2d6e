#!/usr/bin/env python3
"""Independent check of a C2F2 written by `dml train`: PyTorch reads its safetensors file (parsed
here from the format itself, section 6.1 of research/ecosystem.md) into torch.nn layers with
strict key and shape checking, embeds the same images, and must agree with `dml embed`.

    pytorch_embed_check.py WEIGHTS.safetensors IMAGES.npy DML_EMBEDDINGS.npy DIM

Exit 0 when they agree (max |difference| <= 1e-4 * max |embedding|: float32 sums in another
order), 1 when not. Used by tests/tools/pytorch_embed_test.sh."""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


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


class C2F2(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = torch.nn.Linear(3136, 1024)
        self.fc2 = torch.nn.Linear(1024, dim)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


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
