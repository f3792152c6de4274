#!/usr/bin/python3
# Reference for `gpulab bench train --model llama-*`: the PyTorch Llama of
# tests/parity/llama_reference.py trained on random token windows the way PyTorch's docs advise
# (set_num_threads, zero_grad(set_to_none), autocast for bf16), the optimizer of `gpulab bench
# train` (SGD lr 0.1, momentum 0.9, wd 5e-4). Prints one JSON line: sequences/s after warm-up
# ("images_per_second", the key compare reads), tokens/s and peak host memory. One process, or
# DDP under torchrun.
import argparse, json, os, resource, sys, time
import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "parity"))
from llama_reference import Llama  # noqa: E402

SHAPES = {  # src/train/models/llama_config.cpp, vocabulary of --dataset synthetic-text
    "llama-tiny": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=8),
    "llama-125m": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                       num_attention_heads=12, num_key_value_heads=4),
}
p = argparse.ArgumentParser()
p.add_argument("--model", default="llama-125m", choices=sorted(SHAPES))
p.add_argument("--batch_size", type=int, default=4)
p.add_argument("--seq_len", type=int, default=256)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
a = p.parse_args()

world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
if world > 1:
    dist.init_process_group("gloo")
torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
torch.manual_seed(0)
cfg = dict(SHAPES[a.model], vocab_size=256, rms_norm_eps=1e-5, rope_theta=10000.0,
           max_position_embeddings=2048, tie_word_embeddings=False)
model = Llama(cfg)
if world > 1:
    model = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
g = torch.Generator().manual_seed(rank)
amp = a.precision == "bf16"
model.train()
measured, t_total = 0, 0.0
for step in range(a.warmup + a.steps):
    tokens = torch.randint(0, 256, (a.batch_size, a.seq_len + 1), generator=g)
    t0 = time.perf_counter()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=amp):
        logits = model(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.float().reshape(-1, 256), tokens[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step >= a.warmup:
        t_total += time.perf_counter() - t0
        measured += 1
seqs = measured * a.batch_size * world
out = {"images_per_second": seqs / t_total, "tokens_per_second": seqs * a.seq_len / t_total,
       "steps": measured, "world_size": world,
       "peak_host_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
       "loss": float(loss.detach()), "torch": torch.__version__}
if rank == 0:
    print(json.dumps(out))
if world > 1:
    dist.destroy_process_group()
