#!/usr/bin/python3
"""PyTorch reference of the GPT-2 decoder for gpulab's parity check.

Written from the published architecture (Radford et al. 2019, "Language Models are Unsupervised
Multitask Learners": GPT-1's decoder with LayerNorm moved to each block's input and after the
last block, learned position embeddings, a GELU MLP of four times the width, the output head
tied to the token embedding), with Hugging Face's GPT2LMHeadModel parameter names and its Conv1D
layout (weights stored in x out), so the same safetensors file loads on both sides. Uses only
Debian's python3-torch.

  gpt2_reference.py grads --config C.json --out DIR [--batch B] [--seq T] [--seed S]
                    [--variant gpt2|no_positions]
      random weights, tokens; writes weights.safetensors, input.safetensors and
      reference.safetensors (logits, loss, grad.<name> for every parameter). --variant
      no_positions leaves the position table out of the forward pass: a deliberately different
      model (the negative control).
"""
import argparse
import json
import math
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import lm_grad_check  # noqa: E402


class Conv1D(nn.Module):
    """y = x W + b with W stored in x out (GPT-2's original TensorFlow layout)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out).normal_(0.0, 0.02))
        self.bias = nn.Parameter(torch.randn(n_out) * 0.02)

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.c_attn = Conv1D(d, 3 * d)
        self.c_proj = Conv1D(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, self.hd).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        out = torch.softmax(scores, -1) @ v
        return self.c_proj(out.transpose(1, 2).reshape(b, t, d))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class MLP(nn.Module):
    def __init__(self, d, inner):
        super().__init__()
        self.c_fc = Conv1D(d, inner)
        self.c_proj = Conv1D(inner, d)

    def forward(self, x):
        return self.c_proj(gelu_tanh(self.c_fc(x)))


def layer_norm(d, eps):
    ln = nn.LayerNorm(d, eps=eps)
    with torch.no_grad():  # not the identity, so that the check sees the norms' parameters
        ln.weight.add_(torch.randn(d) * 0.1)
        ln.bias.add_(torch.randn(d) * 0.1)
    return ln


class Block(nn.Module):
    def __init__(self, d, heads, inner, eps):
        super().__init__()
        self.ln_1 = layer_norm(d, eps)
        self.attn = Attention(d, heads)
        self.ln_2 = layer_norm(d, eps)
        self.mlp = MLP(d, inner)

    def forward(self, x):
        h = x + self.attn(self.ln_1(x))
        return h + self.mlp(self.ln_2(h))


class Stack(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, eps = cfg["n_embd"], cfg.get("layer_norm_epsilon", 1e-5)
        inner = cfg.get("n_inner") or 4 * d
        self.wte = nn.Embedding(cfg["vocab_size"], d)
        self.wpe = nn.Embedding(cfg["n_positions"], d)
        with torch.no_grad():
            self.wte.weight.normal_(0.0, 0.02)
            self.wpe.weight.normal_(0.0, 0.02)
        self.h = nn.ModuleList(Block(d, cfg["n_head"], inner, eps) for _ in range(cfg["n_layer"]))
        self.ln_f = layer_norm(d, eps)


class GPT2(nn.Module):
    def __init__(self, cfg, variant="gpt2"):
        super().__init__()
        self.variant = variant
        self.transformer = Stack(cfg)
        self.tied = cfg.get("tie_word_embeddings", True)
        if not self.tied:
            self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
            with torch.no_grad():
                self.lm_head.weight.normal_(0.0, 0.02)

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.transformer.wte(tokens)
        if self.variant != "no_positions":
            h = h + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            h = block(h)
        h = self.transformer.ln_f(h)
        w = self.transformer.wte.weight if self.tied else self.lm_head.weight
        return nn.functional.linear(h, w)


def grads(args):
    torch.manual_seed(args.seed)
    with open(args.config) as f:
        cfg = json.load(f)
    lm_grad_check(GPT2(cfg, args.variant), cfg["vocab_size"], args.batch, args.seq, args.out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["grads"])
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variant", choices=["gpt2", "no_positions"], default="gpt2")
    grads(p.parse_args())


if __name__ == "__main__":
    main()
