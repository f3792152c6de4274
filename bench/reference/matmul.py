#!/usr/bin/python3
# Reference for `gpulab gpu-test`: the same square products through torch.matmul, timed the
# way PyTorch's docs recommend (warm-up, synchronize before reading the clock), as JSON.
import argparse, json, os, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--device", default="cpu")
p.add_argument("--dtype", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"])
p.add_argument("--size", type=int, default=2048)
p.add_argument("--iterations", type=int, default=5000)
p.add_argument("--warmup", type=int, default=3)
a = p.parse_args()

dev = torch.device(a.device)
if dev.type == "cpu":
    torch.set_num_threads(int(os.environ.get("GPULAB_NUM_THREADS", os.cpu_count())))
else:
    torch.backends.cuda.matmul.allow_tf32 = a.dtype == "tf32"
dt = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
x = torch.randn(a.size, a.size, device=dev, dtype=dt)
y = torch.randn(a.size, a.size, device=dev, dtype=dt)
out = torch.empty(a.size, a.size, device=dev, dtype=dt)
sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
for _ in range(a.warmup):
    torch.matmul(x, y, out=out)
sync()
t0 = time.perf_counter()
for _ in range(a.iterations):
    torch.matmul(x, y, out=out)
sync()
secs = time.perf_counter() - t0
print(json.dumps({"total_seconds": secs, "average_gflops": 2 * a.size**3 * a.iterations / secs / 1e9,
                  "torch": torch.__version__, "threads": torch.get_num_threads()}))
