#!/usr/bin/env python3
"""Compares two safetensors files tensor by tensor (DDP vs one process).

Prints the largest relative difference, max|a-b| / max|b| per tensor, and fails when it is above
the tolerance or when the files hold different tensors.
usage: compare_weights.py A.safetensors B.safetensors TOLERANCE
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
          "I32": np.int32, "U8": np.uint8, "I8": np.int8}


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
        if info["dtype"] == "BF16":
            u16 = np.frombuffer(body[begin:end], dtype=np.uint16).astype(np.uint32) << 16
            arr = u16.view(np.float32)
        else:
            arr = np.frombuffer(body[begin:end], dtype=DTYPES[info["dtype"]])
        out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


def main():
    a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
    if set(a) != set(b):
        print("different tensor names:", sorted(set(a) ^ set(b)))
        return 1
    worst, worst_name = 0.0, ""
    for name in sorted(a):
        x, y = a[name], b[name]
        if x.shape != y.shape:
            print(f"{name}: shape {x.shape} vs {y.shape}")
            return 1
        if x.size == 0:
            continue
        denom = max(float(np.abs(y).max()), 1e-12)
        rel = float(np.abs(x - y).max()) / denom
        if rel > worst:
            worst, worst_name = rel, name
    print(f"max relative weight difference {worst:.3e} over {len(a)} tensors"
          f" (worst: {worst_name or '-'}), tolerance {tol:g}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
