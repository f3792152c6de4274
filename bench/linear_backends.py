#!/usr/bin/python3
# Which library runs a float32 linear layer's three products fastest on this CPU (the choice
# behind src/train/ops/onednn_linear.h): MKL's sgemm (torch.mm, libtorch's linear) against oneDNN's
# matmul (torch.ops.mkldnn._linear_pointwise) for y = x W^T, dX = g W and dW = g^T x, at a
# llama-125m step's widths and 16 to 8192 rows. Prints MKL time / oneDNN time (above 1: oneDNN
# faster), medians of 5 rounds. Usage: .venv/bin/python3 bench/linear_backends.py [--threads N]
import argparse, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
a = p.parse_args()
torch.set_num_threads(a.threads)
lp = torch.ops.mkldnn._linear_pointwise


def onednn(x, w):
    return lp(x, w, None, "none", [], "")


def median_seconds(f, n=10):
    for _ in range(3):
        f()
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            f()
        rounds.append((time.perf_counter() - t) / n)
    return sorted(rounds)[2]


print(f"torch {torch.__version__}, {a.threads} threads; MKL time / oneDNN time")
for m in [16, 64, 256, 1024, 2048, 8192]:
    for i, o in [(768, 768), (768, 2048), (2048, 768), (768, 256)]:
        x, w, g = torch.randn(m, i), torch.randn(o, i), torch.randn(m, o)
        pairs = {"y=xW^T": (lambda: torch.mm(x, w.t()), lambda: onednn(x, w)),
                 "dX=gW": (lambda: torch.mm(g, w), lambda: onednn(g, w.t())),
                 "dW=g^Tx": (lambda: torch.mm(g.t(), x), lambda: onednn(g.t(), x.t()))}
        cells = [f"{k} {median_seconds(mkl) / median_seconds(dnn):.2f}" for k, (mkl, dnn) in pairs.items()]
        print(f"rows {m:5d} {i:5d}->{o:<5d} " + "  ".join(cells), flush=True)
