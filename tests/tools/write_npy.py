"""Writes a small .npy file without numpy: write_npy.py OUT DTYPE ROWS COLS V... (DTYPE f4 or i8;
COLS 0 for a 1-D array)."""
import struct
import sys

out, dtype, rows, cols = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
values = sys.argv[5:]
shape = "(%d, %d)" % (rows, cols) if cols else "(%d,)" % rows
header = "{'descr': '<%s', 'fortran_order': False, 'shape': %s, }" % (dtype, shape)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
pack = "<%d%s" % (len(values), "f" if dtype == "f4" else "q")
data = struct.pack(pack, *[float(v) if dtype == "f4" else int(v) for v in values])
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
