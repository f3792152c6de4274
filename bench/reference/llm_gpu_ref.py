#!/usr/bin/env python3
# GPU reference for `gpulab bench train --model llama-*` (make gpu-check): what a user runs
# instead. Hugging Face transformers' LlamaForCausalLM with SDPA attention when it imports, else
# an eager PyTorch Llama of the same shape written here (scaled_dot_product_attention, SwiGLU,
# RMSNorm, rotary "rotate half", grouped-query attention). bf16 autocast over fp32 weights,
# fused AdamW (lr 3e-4, wd 0.1), gradient clipping at 1.0, random token windows; WARMUP untimed
# steps, then STEPS timed ones. Prints one JSON line: tokens/s, TFLOPS and MFU with gpulab's
# FLOPs per token (6N + attention, src/formats/decoder_config.cpp), peak GPU memory.
import argparse, json, math, time
import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {  # src/formats/decoder_config.cpp
    "llama-1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                     num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                     rope_theta=500000.0, tie_word_embeddings=True),
    "llama-125m": dict(vocab_size=256, hidden_size=768, intermediate_size=2048,
                       num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                       rope_theta=10000.0, tie_word_embeddings=False),
    "llama-tiny": dict(vocab_size=256, hidden_size=256, intermediate_size=688,
                       num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                       rope_theta=10000.0, tie_word_embeddings=False),
}
PEAK_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "MI300X": 1307.4e12}

p = argparse.ArgumentParser()
p.add_argument("--model", default="llama-1b", choices=sorted(SHAPES))
p.add_argument("--batch_size", type=int, default=8)
p.add_argument("--seq_len", type=int, default=2048)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--impl", default="auto", choices=["auto", "hf", "eager"])
a = p.parse_args()
cfg = SHAPES[a.model]
dev = torch.device("cuda")
torch.manual_seed(0)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        xf = x.float()
        return self.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, self.h, self.kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = d // self.h
        self.q, self.k = nn.Linear(d, self.h * self.hd, bias=False), nn.Linear(d, self.kv * self.hd, bias=False)
        self.v, self.o = nn.Linear(d, self.kv * self.hd, bias=False), nn.Linear(self.h * self.hd, d, bias=False)
        i = c["intermediate_size"]
        self.gate, self.up, self.down = nn.Linear(d, i, bias=False), nn.Linear(d, i, bias=False), nn.Linear(i, d, bias=False)
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        y = self.n1(x)
        q = rotate(self.q(y).view(b, t, self.h, self.hd).transpose(1, 2), cos, sin)
        k = rotate(self.k(y).view(b, t, self.kv, self.hd).transpose(1, 2), cos, sin)
        v = self.v(y).view(b, t, self.kv, self.hd).transpose(1, 2)
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(b, t, -1))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class EagerLlama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"])
        self.head = None if c["tie_word_embeddings"] else nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, tokens):
        hd = self.c["hidden_size"] // self.c["num_attention_heads"]
        inv = 1.0 / (self.c["rope_theta"] ** (torch.arange(0, hd, 2, device=tokens.device).float() / hd))
        ang = torch.outer(torch.arange(tokens.shape[1], device=tokens.device).float(), inv)
        ang = torch.cat([ang, ang], -1)
        cos, sin = ang.cos(), ang.sin()
        h = self.embed(tokens)
        for blk in self.blocks:
            h = blk(h, cos.to(h.dtype), sin.to(h.dtype))
        h = self.norm(h)
        return F.linear(h, self.embed.weight if self.head is None else self.head.weight)


impl = a.impl
model = None
if impl in ("auto", "hf"):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        hf = LlamaConfig(**cfg, max_position_embeddings=max(a.seq_len, 2048), rms_norm_eps=1e-5,
                         attn_implementation="sdpa")
        model = LlamaForCausalLM(hf).to(dev)
        impl = "hf-transformers-sdpa"
    except Exception as e:  # not installed, or too old for these fields
        if a.impl == "hf":
            raise
        print(f"transformers unavailable ({type(e).__name__}: {e}); using the eager reference", flush=True)
if model is None:
    with torch.device(dev):
        model = EagerLlama(cfg)
    impl = "pytorch-eager-sdpa"

params = sum(p.numel() for p in model.parameters())
L, H, d = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["hidden_size"]
matmul = params - cfg["vocab_size"] * d * (0 if cfg["tie_word_embeddings"] else 1) - (2 * L + 1) * d
flops_tok = 6.0 * matmul + 12.0 * L * H * (d // H) * a.seq_len
decay = [p for n, p in model.named_parameters() if p.dim() > 1 and "embed" not in n]
no_decay = [p for n, p in model.named_parameters() if not (p.dim() > 1 and "embed" not in n)]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=3e-4, fused=True)
g = torch.Generator(device=dev).manual_seed(0)
model.train()
torch.cuda.reset_peak_memory_stats(dev)
t0 = None
for step in range(a.warmup + a.steps):
    if step == a.warmup:
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
    tokens = torch.randint(0, cfg["vocab_size"], (a.batch_size, a.seq_len + 1), device=dev, generator=g)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(tokens[:, :-1])
        logits = out.logits if hasattr(out, "logits") else out
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
torch.cuda.synchronize(dev)
secs = time.perf_counter() - t0
tok_s = a.steps * a.batch_size * a.seq_len / secs
name = torch.cuda.get_device_name(dev)
peak = next((v for k, v in PEAK_BF16.items() if k in name), 0.0)
print(json.dumps({"impl": impl, "model": a.model, "params": params, "tokens_per_second": tok_s,
                  "flops_per_token": flops_tok, "tflops": tok_s * flops_tok / 1e12,
                  "mfu": tok_s * flops_tok / peak if peak else None, "device": name,
                  "loss": float(loss.detach()),
                  "peak_device_memory_bytes": torch.cuda.max_memory_allocated(dev),
                  "peak_device_reserved_bytes": torch.cuda.max_memory_reserved(dev),
                  "torch": torch.__version__}))
