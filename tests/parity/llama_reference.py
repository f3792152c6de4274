#!/usr/bin/python3
"""PyTorch reference of the Llama decoder for gpulab's learning checks and benchmarks.

Written from the published architecture (Touvron et al. 2023, "LLaMA", and Meta's Llama 3
model card: pre-norm RMSNorm, rotary embeddings in the "rotate half" layout of Hugging Face's
LlamaForCausalLM, grouped-query attention, SwiGLU), with Hugging Face's parameter names so the
same safetensors file loads on both sides. Uses only Debian's python3-torch.

  llama_reference.py init --config C.json --out W.safetensors [--seed S]
      the reference's random initial weights (normal(0, 0.02) matrices, unit norm scales).
  llama_reference.py train --config C.json --weights W --data_dir D [--seq_len T]
                     [--batch_size B] [--limit_train_batches K] [--num_epochs E]
                     [--learning_rate LR --weight_decay WD --warmup_epochs W --clip_grad C]
                     [--double] [--out W2.safetensors] [--swap_windows]
      trains from the given weights (fp32, or fp64 with --double; one process) on a token folder of `gpulab data
      tokenize`, in the window order of `gpulab train` (src/train/data/token_windows.cpp,
      reproduced here) with torch.optim.AdamW, gpulab's warm-up + cosine schedule and
      clip_grad_norm_; after each epoch evaluates on gpulab's validation windows and prints one
      JSON line per epoch; --out writes the final weights (HF names); --swap_windows trains
      steps 0 and 1 on each other's windows (a control: the weights must then differ).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import load_safetensors, save_safetensors  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x if x.dtype == torch.float64 else x.float()  # at least float32, as gpulab
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * y.to(x.dtype)


def rotary(head_dim, theta, length):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
    return angles


def apply_rotary(x, angles, layout):
    if layout == "half":
        table = torch.cat([angles, angles], -1)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * table.cos().to(x.dtype) + rotated * table.sin().to(x.dtype)
    # Interleaved pairs (the original Meta layout): a different model for the same weights.
    xr = x.float().reshape(*x.shape[:-1], -1, 2)
    c, s = angles.cos(), angles.sin()
    out = torch.stack([xr[..., 0] * c - xr[..., 1] * s, xr[..., 0] * s + xr[..., 1] * c], -1)
    return out.flatten(-2).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.h, self.kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.hd = cfg.get("head_dim") or d // self.h
        self.q_proj = nn.Linear(d, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, d, bias=False)

    def forward(self, x, angles, layout):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.hd).transpose(1, 2)
        q, k = apply_rotary(q, angles, layout), apply_rotary(k, angles, layout)
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        wide = torch.float64 if v.dtype == torch.float64 else torch.float32
        probs = torch.softmax(scores, -1, dtype=wide).to(v.dtype)
        return self.o_proj((probs @ v).transpose(1, 2).reshape(b, t, self.h * self.hd))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(d, i, bias=False)
        self.up_proj = nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, x, angles, layout):
        h = x + self.self_attn(self.input_layernorm(x), angles, layout)
        return h + self.mlp(self.post_attention_layernorm(h))


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class Llama(nn.Module):
    def __init__(self, cfg, layout="half"):
        super().__init__()
        self.cfg, self.layout = cfg, layout
        self.model = Decoder(cfg)
        self.tied = cfg.get("tie_word_embeddings", False)
        if not self.tied:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        for name, p in self.named_parameters():
            with torch.no_grad():
                p.normal_(0.0, 0.02) if p.dim() >= 2 else p.fill_(1.0)

    def forward(self, tokens):
        hd = self.cfg.get("head_dim") or self.cfg["hidden_size"] // self.cfg["num_attention_heads"]
        angles = rotary(hd, self.cfg.get("rope_theta", 10000.0), tokens.shape[1])
        h = self.model.embed_tokens(tokens)
        for block in self.model.layers:
            h = block(h, angles, self.layout)
        h = self.model.norm(h)
        w = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return nn.functional.linear(h, w)


def load_config(path):
    with open(path) as f:
        cfg = json.load(f)
    cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])
    return cfg


def init(args):
    torch.manual_seed(args.seed)
    save_safetensors(Llama(load_config(args.config)).state_dict(), args.out)


# ---- gpulab's data order (src/train/data/token_windows.cpp, sampler.cpp, transforms.cpp) ----
MASK = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def seeded_permutation(size, seed):
    v = list(range(size))
    state = mix64(seed ^ 0x243F6A8885A308D3)
    for i in range(size - 1, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        j = mix64(state) % (i + 1)
        v[i], v[j] = v[j], v[i]
    return v


class TokenWindows:
    """TokenWindows of one process (rank 0 of 1): window starts of micro-batch `index`."""

    def __init__(self, tokens, seq_len, batch_size, seed):
        self.tokens, self.t, self.b, self.seed = tokens, seq_len, batch_size, seed & MASK
        self.windows = (len(tokens) - 1) // seq_len
        self.steps_per_epoch = self.windows // batch_size
        if self.steps_per_epoch == 0:
            sys.exit("error: the training split holds fewer windows than one batch")
        self.epoch, self.offset, self.perm = -1, 0, None

    def starts(self, index):
        epoch, k = divmod(index, self.steps_per_epoch)
        if epoch != self.epoch:
            key = mix64(self.seed ^ mix64((epoch + 0x51ED27) & MASK))
            slack = (len(self.tokens) - 1) % self.t
            self.offset = mix64(key) % (slack + 1)
            self.perm = seeded_permutation(self.windows, key)
            self.epoch = epoch
        return [self.offset + self.perm[k * self.b + i] * self.t for i in range(self.b)]


def gather(tokens, starts, seq_len):
    w = torch.stack([tokens[s:s + seq_len + 1] for s in starts])
    return w[:, :-1], w[:, 1:]


def val_starts(n_tokens, seq_len, batch_size, max_batches=16):
    """ValWindows of one process: non-overlapping windows from 0, at most 16 batches."""
    windows = (n_tokens - 1) // seq_len
    per = min(windows, max_batches * batch_size)
    return [[j * seq_len for j in range(i, min(i + batch_size, per))]
            for i in range(0, per, batch_size)]


def lr_at(step, base, steps_per_epoch, epochs, warmup_epochs, min_lr=0.0):
    """src/train/optim/schedule.cpp, cosine with linear warm-up."""
    total = steps_per_epoch * max(1, epochs)
    # C++ llround: halves away from zero (Python's round() would round them to even).
    warm = min(total, int(math.floor(warmup_epochs * steps_per_epoch + 0.5)))
    if step < warm:
        return base * (step + 1) / warm
    t = min(max((step - warm) / max(1, total - warm), 0.0), 1.0)
    return min_lr + 0.5 * (base - min_lr) * (1.0 + math.cos(math.pi * t))


def read_tokens(folder, split):
    import numpy as np
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    dtype = {"uint16": "<u2", "uint32": "<u4"}[meta["dtype"]]  # little-endian, no header
    data = np.fromfile(os.path.join(folder, f"{split}.bin"), dtype=dtype)
    return torch.from_numpy(data.astype(np.int64)), meta


def train(args):
    cfg = load_config(args.config)
    dtype = torch.float64 if args.double else torch.float32
    model = Llama(cfg).to(dtype)
    weights = load_safetensors(args.weights)
    model.load_state_dict({k: v.to(dtype) for k, v in weights.items()}, strict=True)
    train_tokens, meta = read_tokens(args.data_dir, "train")
    val_tokens, _ = read_tokens(args.data_dir, "val")
    windows = TokenWindows(train_tokens, args.seq_len, args.batch_size, args.seed)
    batches = windows.steps_per_epoch
    if args.limit_train_batches > 0:
        batches = min(batches, args.limit_train_batches)
    # gpulab's groups (src/train/optim/optimizers.cpp): no decay on norms and the token table.
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() <= 1 or "embed_tokens" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.learning_rate)
    vocab = cfg["vocab_size"]
    step = 0
    for epoch in range(args.num_epochs):
        model.train()
        t0, loss_sum = time.perf_counter(), 0.0
        for b in range(batches):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args.learning_rate, batches, args.num_epochs,
                                args.warmup_epochs)
            index = epoch * batches + b
            if args.swap_windows and index < 2:  # a control's mutation: steps 0 and 1 swapped
                index = 1 - index
            x, y = gather(train_tokens, windows.starts(index), args.seq_len)
            loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if args.clip_grad > 0:
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
            opt.step()
            loss_sum += float(loss.detach())
            step += 1
        seconds = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            total, count = 0.0, 0
            for starts in val_starts(len(val_tokens), args.seq_len, args.batch_size):
                x, y = gather(val_tokens, starts, args.seq_len)
                total += float(nn.functional.cross_entropy(
                    model(x).reshape(-1, vocab), y.reshape(-1), reduction="sum"))
                count += y.numel()
        val = total / count
        print(json.dumps({"epoch": epoch + 1, "step": step, "train_loss": loss_sum / batches,
                          "val_loss": val,
                          "val_bits_per_byte": val / math.log(2) / meta["bytes_per_token"],
                          "tokens_per_second": batches * args.batch_size * args.seq_len / seconds,
                          "torch": torch.__version__}), flush=True)
    if args.out:
        save_safetensors(model.state_dict(), args.out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("--config", required=True)
    i.add_argument("--out", required=True)
    i.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("train")
    t.add_argument("--config", required=True, help="Hugging Face config.json of the model")
    t.add_argument("--weights", required=True, help="initial weights (safetensors, HF names)")
    t.add_argument("--data_dir", required=True, help="token folder of `gpulab data tokenize`")
    t.add_argument("--seq_len", type=int, default=256)
    t.add_argument("--batch_size", type=int, default=8)
    t.add_argument("--limit_train_batches", type=int, default=0)
    t.add_argument("--num_epochs", type=int, default=1)
    t.add_argument("--learning_rate", type=float, default=3e-3)
    t.add_argument("--weight_decay", type=float, default=0.1)
    t.add_argument("--warmup_epochs", type=float, default=0.0)
    t.add_argument("--clip_grad", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=0, help="0: all cores")
    t.add_argument("--double", action="store_true", help="train in float64 (gpulab's fp64)")
    t.add_argument("--out", default="", help="write the final weights here (safetensors)")
    t.add_argument("--swap_windows", action="store_true",
                   help="a control: train steps 0 and 1 on each other's windows")
    args = p.parse_args()
    threads = getattr(args, "threads", 0) or (os.cpu_count() or 1)
    torch.set_num_threads(max(1, threads))
    if args.cmd == "init":
        init(args)
    elif args.cmd == "train":
        train(args)


if __name__ == "__main__":
    main()
