#!/usr/bin/env python3
"""Writes the hand-made seed files of the binary-format fuzz targets (docs/testing.md, Fuzzing):
small valid .npy, safetensors, IDX and MATLAB v5 files and TensorBoard event files, each laid out
byte by byte from the format's definition (Python's standard library only), so that the fuzzer starts past the format
checks. Run from anywhere: python3 tests/fuzz/seeds/make_seeds.py"""
import gzip
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def write(kind, name, data):
    os.makedirs(os.path.join(HERE, kind), exist_ok=True)
    with open(os.path.join(HERE, kind, name), "wb") as f:
        f.write(data)


# ---- .npy (NEP 1): magic, version, header length, a Python dict literal padded to 64 bytes ----
def npy(descr, shape, payload, fortran=False, version=1):
    shape_text = "(" + "".join(f"{d}, " for d in shape).rstrip(" ")
    shape_text = shape_text.rstrip(",") + ",)" if len(shape) == 1 else shape_text.rstrip(",") + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_text}, }}"
    length_bytes = 2 if version == 1 else 4
    prefix = 6 + 2 + length_bytes
    padded = header + " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    length = struct.pack("<H" if version == 1 else "<I", len(padded))
    return b"\x93NUMPY" + bytes([version, 0]) + length + padded.encode("latin1") + payload


write("npy", "f32_2x3.npy", npy("<f4", (2, 3), struct.pack("<6f", 0, 1, 2, 3, 4, 5)))
write("npy", "i64_4.npy", npy("<i8", (4,), struct.pack("<4q", -1, 0, 1, 2)))
# Refused by the reader (Fortran order): a seed for that path.
write("npy", "u1_2x2_fortran.npy", npy("|u1", (2, 2), bytes([1, 2, 3, 4]), fortran=True))
write("npy", "f64_scalar_v2.npy", npy("<f8", (), struct.pack("<d", 0.5), version=2))


# ---- safetensors: u64 little-endian header length, a JSON header, the data buffer -------------
def safetensors(tensors, metadata=None):
    header, payload = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(payload), len(payload) + len(data)]}
        payload += data
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + payload


write("safetensors", "f32_i64.safetensors", safetensors({
    "weight": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
    "steps": ("I64", [1], struct.pack("<q", 7))}, {"format": "pt"}))
write("safetensors", "f16_bf16.safetensors", safetensors({
    "half": ("F16", [2], struct.pack("<2H", 0x3C00, 0xC000)),
    "brain": ("BF16", [1, 2], struct.pack("<2H", 0x3F80, 0x4000))}))
write("safetensors", "scalar_empty.safetensors", safetensors({
    "scalar": ("F64", [], struct.pack("<d", 2.0)), "empty": ("F32", [0, 3], b"")}))


# ---- IDX (MNIST): 0x0000, the element type, the number of dimensions, u32 big-endian sizes ----
def idx(type_code, dims, payload):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


images = idx(0x08, [2, 2, 3], bytes(range(12)))
write("idx", "images_u8.idx", images)
write("idx", "labels_u8.idx", idx(0x08, [3], bytes([7, 0, 9])))
write("idx", "images_u8.idx.gz", gzip.compress(images, mtime=0))
write("idx", "f32.idx", idx(0x0D, [2], struct.pack(">2f", 1.5, -2.0)))
write("idx", "i32.idx", idx(0x0C, [2], struct.pack(">2i", -3, 4)))


# ---- MATLAB v5: a 128-byte header, then miMATRIX elements (tag: u32 type, u32 size; padded) ----
MI_INT8, MI_UINT8, MI_UINT16, MI_INT32, MI_UINT32, MI_DOUBLE = 1, 2, 4, 5, 6, 9
MI_MATRIX, MI_COMPRESSED = 14, 15
MX_CELL, MX_STRUCT, MX_CHAR, MX_DOUBLE, MX_UINT8 = 1, 2, 4, 6, 9


def element(mi_type, data):
    return struct.pack("<II", mi_type, len(data)) + data + b"\0" * ((8 - len(data) % 8) % 8)


def small_element(mi_type, data):  # up to 4 bytes packed into the tag
    return struct.pack("<HH", mi_type, len(data)) + data + b"\0" * (4 - len(data))


def matrix(mx_class, dims, name, body):
    flags = element(MI_UINT32, struct.pack("<II", mx_class, 0))
    dimensions = element(MI_INT32, struct.pack(f"<{len(dims)}i", *dims))
    return element(MI_MATRIX, flags + dimensions + element(MI_INT8, name.encode()) + body)


def mat_file(*variables):
    text = b"MATLAB 5.0 MAT-file, written by tests/fuzz/seeds/make_seeds.py"
    header = text + b" " * (116 - len(text)) + b"\0" * 8 + struct.pack("<H", 0x0100) + b"IM"
    return header + b"".join(variables)


doubles = matrix(MX_DOUBLE, [1, 3], "values", element(MI_DOUBLE, struct.pack("<3d", 1, 2.5, -4)))
uint8s = matrix(MX_UINT8, [2, 1], "bytes", small_element(MI_UINT8, bytes([3, 250])))
chars = matrix(MX_CHAR, [1, 5], "text", element(MI_UINT16, "car_1".encode("utf-16-le")))
cell = matrix(MX_CELL, [1, 2], "names", matrix(MX_CHAR, [1, 1], "", element(MI_UINT16, b"a\0"))
              + matrix(MX_DOUBLE, [1, 1], "", element(MI_DOUBLE, struct.pack("<d", 3))))
field_length = 8
fields = [b"relative", b"class"]
structure = matrix(MX_STRUCT, [1, 2], "annotations",
                   small_element(MI_INT32, struct.pack("<i", field_length))
                   + element(MI_INT8, b"".join(f.ljust(field_length, b"\0") for f in fields))
                   + b"".join(matrix(MX_CHAR, [1, 3], "", element(MI_UINT16, f"a{i}b".encode("utf-16-le")))
                              + matrix(MX_DOUBLE, [1, 1], "", element(MI_DOUBLE, struct.pack("<d", i)))
                              for i in range(2)))
write("mat", "numeric_char.mat", mat_file(doubles, uint8s, chars))
write("mat", "cell_struct.mat", mat_file(cell, structure))
compressed = zlib.compress(structure)
write("mat", "compressed.mat", mat_file(struct.pack("<II", MI_COMPRESSED, len(compressed)) + compressed))


# ---- TensorBoard event files: TFRecords (length, masked CRC-32C of it, data, masked CRC-32C of
# the data) around serialized tensorboard.Event protobufs (tools/dml/tensorboard/) --------------
def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def varint(value):
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def event(step, file_version=None, scalars=()):
    body = b"\x09" + struct.pack("<d", 1.7e9) + (b"\x10" + varint(step) if step else b"")
    if file_version is not None:
        body += b"\x1a" + varint(len(file_version)) + file_version
    values = b"".join(b"\x0a" + varint(len(v)) + v for v in (
        b"\x0a" + varint(len(tag)) + tag + b"\x15" + struct.pack("<f", value) for tag, value in scalars))
    if scalars:
        body += b"\x2a" + varint(len(values)) + values
    return body


# Byte 0 picks the mode of tests/fuzz/fuzz_event_file.cpp ('0' a file as is, '1' records framed
# by the target: a length byte and the Event), byte 1 the checkpoint's step.
events = [event(0, file_version=b"brain.Event:2"), event(50, scalars=[(b"train/loss", 0.5)]),
          event(100, scalars=[(b"train/loss", 0.4), (b"eval/recall@1", 0.8)]), event(150)]
whole = b"".join(tfrecord(e) for e in events)
write("event_file", "four-events.bin", b"0" + bytes([100]) + whole)
write("event_file", "torn-tail.bin", b"0" + bytes([200]) + whole + tfrecord(events[1])[:9])
write("event_file", "framed-by-target.bin",
      b"1" + bytes([60]) + b"".join(bytes([len(e)]) + e for e in events) + b"\x30ab")
