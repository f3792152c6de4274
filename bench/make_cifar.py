#!/usr/bin/python3
# Writes a CIFAR-10 "python version" folder (cifar-10-batches-py/) of random images, in the
# format the real download has, for benchmarks that need 32x32 CIFAR-format data offline.
import os, pickle, sys
import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "bench/data/cifar-10-batches-py"
per_batch = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
for name in names:
    d = {b"batch_label": name.encode(), b"labels": rng.integers(0, 10, per_batch).tolist(),
         b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
         b"filenames": [f"{name}_{i}.png".encode() for i in range(per_batch)]}
    with open(os.path.join(out, name), "wb") as f:
        pickle.dump(d, f, protocol=2)
with open(os.path.join(out, "batches.meta"), "wb") as f:
    pickle.dump({b"label_names": [f"class{i}".encode() for i in range(10)], b"num_vis": 3072,
                 b"num_cases_per_batch": per_batch}, f, protocol=2)
print(out)
