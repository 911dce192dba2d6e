#!/usr/bin/env python3
"""Writes the torch.save fixtures of tests/io/pth_test.cpp without PyTorch (Python stdlib only).

The files have torch.save's layout (torch/serialization.py `_save`, caffe2/serialize/
inline_container.cc `PyTorchStreamWriter`):
  * a zip archive of STORED records under one folder ("archive/" or the file's stem): data.pkl,
    byteorder ("little"), data/<key> for each storage (keys sorted as strings), then version
    ("3\\n") and .data/serialization_id;
  * each local header carries an extra field "FB" <u16 length> "ZZZ..." that pads the record's
    data to a multiple of 64 bytes; the local header's CRC and sizes are 0 (general purpose flag
    bit 3) and a data descriptor follows the data; the central directory holds the real values;
  * data.pkl is pickle protocol 2 with a persistent_id hook: every storage becomes
    ('storage', torch.<T>Storage, key, 'cpu', numel) with keys '0', '1', ... in order of first
    use, and every tensor the REDUCE of torch._utils._rebuild_tensor_v2(storage, offset, size,
    stride, False, OrderedDict()); a state dict is an OrderedDict with a _metadata attribute.
Stand-in `torch` and `torch._utils` modules in sys.modules make pickle write the same GLOBAL
opcodes torch's own objects produce.

Run from the repository root: python3 tests/io/make_torch_fixtures.py
It rewrites tests/io/pth_fixtures/*.pth and the fuzzer's seeds tests/fuzz/seeds/pth/.
"""
import collections
import io
import os
import pickle
import struct
import sys
import types
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "pth_fixtures")
SEEDS = os.path.join(HERE, "..", "fuzz", "seeds", "pth")

# ---- stand-ins for the torch objects that pickle must name ----
torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")


def _rebuild_tensor_v2(*args):
    raise RuntimeError("stand-in: never called")


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
torch._utils = torch_utils
STORAGE_FORMATS = {"FloatStorage": "f", "DoubleStorage": "d", "HalfStorage": "e",
                   "LongStorage": "q", "IntStorage": "i", "BoolStorage": "?"}
for storage_name in STORAGE_FORMATS:
    setattr(torch, storage_name, type(storage_name, (), {"__module__": "torch"}))
sys.modules["torch"] = torch
sys.modules["torch._utils"] = torch_utils


class Storage:
    def __init__(self, type_name, values):
        self.type = getattr(torch, type_name)
        self.numel = len(values)
        self.data = struct.pack("<%d%s" % (len(values), STORAGE_FORMATS[type_name]), *values)


class Tensor:
    """A view of a storage, pickled as torch.Tensor.__reduce_ex__ pickles a CPU tensor."""

    def __init__(self, storage, size, stride=None, offset=0):
        if stride is None:  # contiguous
            stride, step = [], 1
            for dim in reversed(size):
                stride.insert(0, step)
                step *= dim
        self.storage, self.size, self.stride, self.offset = storage, size, stride, offset

    def __reduce_ex__(self, protocol):
        return (_rebuild_tensor_v2, (self.storage, self.offset, tuple(self.size),
                                     tuple(self.stride), False, collections.OrderedDict()))


def tensor(type_name, values, size):
    return Tensor(Storage(type_name, values), size)


class TorchPickler(pickle.Pickler):
    def __init__(self, out):
        super().__init__(out, protocol=2)
        self.storages = {}  # key -> Storage, in order of first use

    def persistent_id(self, obj):
        if not isinstance(obj, Storage):
            return None
        for key, known in self.storages.items():
            if known is obj:
                break
        else:
            key = str(len(self.storages))
            self.storages[key] = obj
        return ("storage", obj.type, key, "cpu", obj.numel)


def state_dict(items, modules):
    """An OrderedDict like nn.Module.state_dict(): items plus the _metadata attribute."""
    result = collections.OrderedDict(items)
    result._metadata = collections.OrderedDict((m, {"version": 1}) for m in modules)
    return result


# ---- the zip container ----
def zip_archive(records, compressed=()):
    out, central = bytearray(), bytearray()
    for name, data in records:
        method = 8 if name.split("/", 1)[1] in compressed else 0
        payload = data
        if method == 8:
            packer = zlib.compressobj(9, zlib.DEFLATED, -15)
            payload = packer.compress(data) + packer.flush()
        full = name.encode()
        start = len(out) + 30 + len(full) + 4
        padding = (64 - start % 64) % 64
        extra = b"FB" + struct.pack("<H", padding) + b"Z" * padding
        crc = zlib.crc32(data)
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x0808, method, 0, 0x21, 0, 0, 0,
                           len(full), len(extra)) + full + extra + payload
        out += struct.pack("<IIII", 0x08074B50, crc, len(payload), len(data))
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, 0x0808, method, 0,
                               0x21, crc, len(payload), len(data), len(full), 0, 0, 0, 0, 0,
                               offset) + full
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(records), len(records), len(central),
                      len(out), 0)
    return bytes(out + central + end)


def torch_save(obj, folder="archive", compressed=(), pickle_bytes=None, byteorder=b"little",
               extra_records=()):
    buffer = io.BytesIO()
    pickler = TorchPickler(buffer)
    pickler.dump(obj)
    records = [(folder + "/data.pkl", pickle_bytes or buffer.getvalue()),
               (folder + "/byteorder", byteorder)] + list(extra_records)
    for key in sorted(pickler.storages):
        records.append((folder + "/data/" + key, pickler.storages[key].data))
    records.append((folder + "/version", b"3\n"))
    records.append((folder + "/.data/serialization_id", b"1234567890123456789012345678901234567890"))
    return zip_archive(records, compressed)


# ---- the fixtures (expected values are written out again, by hand, in pth_test.cpp) ----
def small():
    weight = tensor("FloatStorage", [0.5, -1.0, 2.0, 3.25, 0.0, -4.0], [2, 3])
    bias = tensor("HalfStorage", [1.0, -2.5], [2])
    counter = tensor("LongStorage", [7], [])
    return state_dict([("weight", weight), ("bias", bias), ("num_batches_tracked", counter)],
                      ["", "bn"])


def views():
    shared = Storage("FloatStorage", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    return state_dict([("matrix", Tensor(shared, [2, 3])),
                       ("transposed", Tensor(shared, [3, 2], [1, 3])),
                       ("tail", Tensor(shared, [2], [1], offset=4)),
                       ("counts", tensor("IntStorage", [1, -2, 3], [3])),
                       ("wide", tensor("DoubleStorage", [0.25], [1]))], [""])


def nested():
    weights = state_dict([("module.fc.weight", tensor("FloatStorage", [1.5, -2.0], [1, 2])),
                          ("module.fc.bias", tensor("FloatStorage", [0.75], [1]))], ["", "fc"])
    return {"epoch": 3, "state_dict": weights,
            "optimizer": {"lr": 0.1, "betas": (0.9, 0.999), "step": 1000000},
            "global_step": 2 ** 40}


def c2f2_value(index):
    """The value of element `index` (row-major) of every tensor of c2f2_partial.pth."""
    return ((index * 37) % 101 - 50) / 64.0


def c2f2_partial():
    """conv1 and fc2 (embedding_dim 2) of models::C2F2; tests load it keeping conv2 and fc1."""
    shapes = [("conv1.weight", [32, 1, 5, 5]), ("conv1.bias", [32]), ("fc2.weight", [2, 1024]),
              ("fc2.bias", [2])]
    items = []
    for name, size in shapes:
        numel = 1
        for dim in size:
            numel *= dim
        items.append((name, tensor("FloatStorage", [c2f2_value(i) for i in range(numel)], size)))
    return state_dict(items, ["", "conv1", "fc2"])


def os_system_pickle():
    """What pickle writes for an object whose __reduce__ is (os.system, ('true',))."""
    return b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."


def legacy():
    """The start of a legacy torch.save file: the magic number, protocol 1001, sys_info."""
    return (pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2) +
            pickle.dumps({"protocol_version": 1001, "little_endian": True}, protocol=2))


def main():
    fixtures = {
        "small.pth": torch_save(small()),
        "views.pth": torch_save(views(), folder="views"),
        "nested.pth": torch_save(nested(), folder="nested"),
        "c2f2_partial.pth": torch_save(c2f2_partial()),
        "deflate.pth": torch_save(small(), compressed=("data.pkl",)),
        "os_system.pth": torch_save({}, pickle_bytes=os_system_pickle()),
        "bool.pth": torch_save(state_dict([("mask", tensor("BoolStorage", [True, False], [2]))],
                                          [""])),
        "expanded.pth": torch_save(state_dict(
            [("row", Tensor(Storage("FloatStorage", [1.0, 2.0]), [3, 2], [0, 1]))], [""])),
        "outside.pth": torch_save(state_dict(
            [("late", Tensor(Storage("FloatStorage", [1.0, 2.0]), [2], [1], offset=1))], [""])),
        "legacy.pth": legacy(),
        "big_endian.pth": torch_save(small(), byteorder=b"big"),
        "torchscript.pt": torch_save({}, extra_records=[("archive/constants.pkl", b"\x80\x02).")]),
        "no_state_dict.pth": torch_save({"epoch": 3, "state_dict": {"fc.weight": 1.5}}),
    }
    seeds = ["small.pth", "views.pth", "nested.pth", "bool.pth", "expanded.pth"]
    os.makedirs(FIXTURES, exist_ok=True)
    os.makedirs(SEEDS, exist_ok=True)
    for name, data in fixtures.items():
        with open(os.path.join(FIXTURES, name), "wb") as out:
            out.write(data)
        if name in seeds:
            with open(os.path.join(SEEDS, name), "wb") as out:
                out.write(data)


if __name__ == "__main__":
    main()
