#!/usr/bin/env python3
"""Compares two safetensors files tensor by tensor (DDP vs one process).

Prints the largest relative difference, max|a-b| / max|b| per tensor, and fails when it is above
the tolerance or when the files hold different tensors.
usage: compare_weights.py A.safetensors B.safetensors TOLERANCE
"""
import array
import json
import struct
import sys

# safetensors dtype -> array typecode (the standard library only: no numpy on the CI host).
CODES = {"F64": "d", "F32": "f", "I64": "q", "I32": "i", "U8": "B", "I8": "b"}


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        chunk = body[begin:end]
        if info["dtype"] == "BF16":
            u16 = array.array("H", chunk)
            vals = list(struct.unpack(f"<{len(u16)}f", b"".join(struct.pack("<I", v << 16) for v in u16)))
        elif info["dtype"] == "F16":
            vals = list(struct.unpack(f"<{len(chunk) // 2}e", chunk))
        else:
            vals = list(array.array(CODES[info["dtype"]], chunk))
        out[name] = (tuple(info["shape"]), vals)
    return out


def main():
    a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
    if set(a) != set(b):
        print("different tensor names:", sorted(set(a) ^ set(b)))
        return 1
    worst, worst_name = 0.0, ""
    for name in sorted(a):
        (sx, x), (sy, y) = a[name], b[name]
        if sx != sy:
            print(f"{name}: shape {sx} vs {sy}")
            return 1
        if not x:
            continue
        denom = max(max(abs(v) for v in y), 1e-12)
        rel = max(abs(p - q) for p, q in zip(x, y)) / denom
        if rel > worst:
            worst, worst_name = rel, name
    print(f"max relative weight difference {worst:.3e} over {len(a)} tensors"
          f" (worst: {worst_name or '-'}), tolerance {tol:g}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
