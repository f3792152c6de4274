#!/usr/bin/python3
# Reference for `gpulab bench train --model llama-*`: the PyTorch Llama of
# tests/parity/llama_reference.py trained on random token windows the way PyTorch's docs advise
# (set_num_threads, zero_grad(set_to_none), autocast for bf16), the optimizer of `gpulab bench
# train` (SGD lr 0.1, momentum 0.9, wd 5e-4; or AdamW), both with gpulab's two groups (no decay on
# norms and token embeddings). Prints one JSON line: sequences/s after warm-up
# ("images_per_second", the key compare reads), tokens/s and peak host memory. One process, or
# DDP under torchrun; --zero shards the optimizer state with PyTorch's ZeroRedundancyOptimizer
# (ZeRO-1, the sharded reference that Debian's torch can run: its FSDP does not import).
import argparse, json, os, resource, sys, time
import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "parity"))
from llama_reference import Llama  # noqa: E402

SHAPES = {  # src/formats/decoder_config.cpp, vocabulary of --dataset synthetic-text
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
p.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
p.add_argument("--learning_rate", type=float, default=0.1)
p.add_argument("--weight_decay", type=float, default=5e-4)
p.add_argument("--zero", action="store_true", help="ZeroRedundancyOptimizer over DDP (2+ ranks)")
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
# gpulab's groups (src/train/optim/optimizers.h): no decay on norms, biases and token embeddings.
decay, no_decay = [], []
for name, w in model.named_parameters():
    (no_decay if w.dim() <= 1 or "embed_tokens" in name else decay).append(w)
groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
if a.optimizer == "sgd":
    cls, kw = torch.optim.SGD, dict(lr=a.learning_rate, momentum=0.9, weight_decay=a.weight_decay)
else:
    cls, kw = torch.optim.AdamW, dict(lr=a.learning_rate, weight_decay=a.weight_decay)
if a.zero:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    opt = ZeroRedundancyOptimizer(groups, optimizer_class=cls, **kw)
else:
    opt = cls(groups, **kw)
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
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {"images_per_second": seqs / t_total, "tokens_per_second": seqs * a.seq_len / t_total,
       "steps": measured, "world_size": world, "peak_host_memory_bytes": peak,
       "optimizer": a.optimizer + (" (ZeroRedundancyOptimizer)" if a.zero else ""),
       "loss": float(loss.detach()), "torch": torch.__version__}
if world > 1:  # every rank's peak too: rank 0's is the one compared (gpulab reports rank 0's)
    peaks = torch.tensor([peak], dtype=torch.int64)
    every = [torch.zeros_like(peaks) for _ in range(world)]
    dist.all_gather(every, peaks)
    out["peak_host_memory_bytes_per_rank"] = [int(x) for x in every]
if rank == 0:
    print(json.dumps(out))
if world > 1:
    dist.destroy_process_group()
    # torch 2.15's Gloo threads can abort the interpreter's own exit ("terminate called without an
    # active exception", one rank in a few runs), which fails the run after its figures are out.
    sys.stdout.flush()
    os._exit(0)
