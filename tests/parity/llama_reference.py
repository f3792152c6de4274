#!/usr/bin/python3
"""PyTorch reference of the Llama decoder for gpulab's parity and learning checks.

Written from the published architecture (Touvron et al. 2023, "LLaMA", and Meta's Llama 3
model card: pre-norm RMSNorm, rotary embeddings in the "rotate half" layout of Hugging Face's
LlamaForCausalLM, grouped-query attention, SwiGLU), with Hugging Face's parameter names so the
same safetensors file loads on both sides. Uses only Debian's python3-torch.

  llama_reference.py grads --config C.json --out DIR [--batch B] [--seq T] [--seed S]
                     [--rope half|interleaved]
      random weights, tokens; writes weights.safetensors, input.safetensors and
      reference.safetensors (logits, loss, grad.<name> for every parameter). --rope interleaved
      is a deliberately different model (the negative control).
  llama_reference.py train --config C.json --weights W --data_dir D --steps N ...
      trains from the given weights on gpulab's token windows (see --help) and prints JSON.
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
        xf = x.float()
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
        probs = torch.softmax(scores, -1, dtype=torch.float32).to(v.dtype)
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


def grads(args):
    torch.manual_seed(args.seed)
    cfg = load_config(args.config)
    model = Llama(cfg, args.rope)
    tokens = torch.randint(0, cfg["vocab_size"], (args.batch, args.seq + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    logits = model(inputs)
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    result = {"logits": logits.detach(), "loss": loss.detach().reshape([])}
    for name, p in model.named_parameters():
        result["grad." + name] = p.grad
    save_safetensors(model.state_dict(), f"{args.out}/weights.safetensors")
    save_safetensors({"inputs": inputs, "targets": targets}, f"{args.out}/input.safetensors")
    save_safetensors(result, f"{args.out}/reference.safetensors")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grads")
    g.add_argument("--config", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--batch", type=int, default=2)
    g.add_argument("--seq", type=int, default=16)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--rope", choices=["half", "interleaved"], default="half")
    args = p.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if args.cmd == "grads":
        grads(args)


if __name__ == "__main__":
    main()
