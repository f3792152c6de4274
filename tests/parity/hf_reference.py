#!/usr/bin/python3
"""Hugging Face transformers as the reference of gpulab's language-model parity tests.

Builds transformers' own LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or
GPT2LMHeadModel from a small
config (random weights), writes it with save_pretrained(safe_serialization=True) for gpulab to
read, and records what transformers computes on random tokens: logits, the causal-LM loss, the
gradient of every parameter after one backward pass, and greedy generate() tokens.

  hf_reference.py grads --family llama|mistral|qwen2|gpt2 --config KWARGS.json --out DIR
                  [--dtype float64|float32] [--batch B] [--seq T] [--seed S]
                  [--prompt P] [--new_tokens N]
                  [--variant hf|interleaved_rotary|unscaled|no_qkv_bias]
                  [--layout lm|hub]

  hf_reference.py padded --family llama|mistral|gpt2 --config KWARGS.json --out DIR
                  --lengths 1,5,17 [--dtype ...] [--new_tokens N] [--seed S]

  KWARGS.json holds the config's keyword arguments (transformers' field names). Writes
  DIR/hf/ (config.json, model.safetensors), DIR/input.safetensors (inputs, targets, prompt) and
  DIR/reference.safetensors (logits, loss, grad.<name>, generated, and noise.logits /
  noise.loss / noise.grad: the reference's own rounding, how far its run is from the same
  weights computed in float64 throughout; transformers' RMSNorm rounds through float32 even in
  a float64 model; in float64 that exact run's logits, loss and gradients too, as exact.*). --variant computes with a deliberately different model than the
  one written (the rotary halves interleaved, GPT-2's attention unscaled, or Qwen2's q/k/v biases
  zeroed): the negative controls. --layout hub (GPT-2, tied) writes the Hugging Face hub's GPT-2 layout instead:
  GPT2Model's save_pretrained (tensor names without "transformer.") plus each block's causal-mask
  buffer h.N.attn.bias, as OpenAI's published model.safetensors holds them. Prints one JSON line
  of facts. `padded` writes DIR/hf/ and DIR/padded.safetensors: prompts of the given lengths
  (random ids, "prompt.<i>"), and "generated" (prompts x new_tokens), greedy generate() of all of
  them in one batch, left-padded with an attention mask (what gpulab's generate_groups does).
"""
import argparse
import copy
import json
import os
import types

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)
from transformers.models.llama import modeling_llama
from transformers.models.mistral import modeling_mistral
from transformers.models.qwen2 import modeling_qwen2

FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM, modeling_llama),
    "mistral": (MistralConfig, MistralForCausalLM, modeling_mistral),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, modeling_qwen2),
    "gpt2": (GPT2Config, GPT2LMHeadModel, None),
}


def rotate_interleaved(x):
    """Rotates adjacent pairs (Meta's original layout) instead of the two halves."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    return torch.stack([-pairs[..., 1], pairs[..., 0]], -1).flatten(-2)


def build(family, kwargs, dtype, seed):
    config_cls, model_cls, _ = FAMILIES[family]
    # sdpa keeps float64 throughout; the eager path's softmax runs in float32 whatever the dtype.
    config = config_cls(**kwargs, attn_implementation="sdpa")
    # No dropout (GPT-2's default is 0.1), so train mode computes the same function as eval.
    for field in ("attn_pdrop", "embd_pdrop", "resid_pdrop", "attention_dropout"):
        if hasattr(config, field):
            setattr(config, field, 0.0)
    torch.manual_seed(seed)
    model = model_cls(config)
    with torch.no_grad():  # norms off the identity, so that their gradients are checked too
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape) * 0.1)
    return model.to(dtype)


def causal_lm_loss(model, logits, targets):
    """The mean next-token cross entropy over every position, as transformers' causal-LM loss
    defines it, computed in the logits' own dtype (its ForCausalLMLoss upcasts to float32 only,
    which would put float32 rounding into a float64 check)."""
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))
    own = model.loss_function(logits=logits.detach(), labels=None, shift_labels=targets,
                              vocab_size=logits.shape[-1])
    assert abs(own.item() - loss.item()) <= 1e-5 * abs(own.item()), (own.item(), loss.item())
    return loss


def forward_backward(model, inputs, targets):
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=inputs, use_cache=False).logits
    loss = causal_lm_loss(model, logits, targets)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape([])}
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach() if p.grad is not None else torch.zeros_like(p)
    return out


def rel(a, b):
    scale = b.abs().max().item()
    diff = (a.double() - b.double()).abs().max().item()
    return diff / scale if scale > 0 else diff


def exact_rms_norm(norm, x):
    """RMSNorm in the input's dtype (transformers' LlamaRMSNorm rounds through float32)."""
    return norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon))


def self_noise(model, result, inputs, targets):
    """The reference's own rounding: how far this run is from the same weights computed in
    float64 throughout (the RMSNorms too). Returns the figures and that exact run."""
    exact = copy.deepcopy(model).double()
    for m in exact.modules():
        if type(m).__name__.endswith("RMSNorm"):
            m.forward = types.MethodType(exact_rms_norm, m)
    exact = forward_backward(exact, inputs, targets)
    grads = [rel(result[k], exact[k]) for k in result if k.startswith("grad.")]
    return {"noise.logits": rel(result["logits"], exact["logits"]),
            "noise.loss": rel(result["loss"], exact["loss"]), "noise.grad": max(grads)}, exact


def greedy(model, prompt, new_tokens):
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                             do_sample=False, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0)
    return out[:, prompt.shape[1]:]


def apply_variant(model, family, variant):
    """Turns the model just written into another one (the negative controls)."""
    if variant == "interleaved_rotary":
        assert family != "gpt2"
        FAMILIES[family][2].rotate_half = rotate_interleaved
    elif variant == "no_qkv_bias":
        assert family == "qwen2"
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.zero_()
    elif variant == "unscaled":
        assert family == "gpt2"
        for block in model.transformer.h:  # what GPT2Attention sets for scale_attn_weights=False
            block.attn.scaling = 1.0


def save(model, family, layout, folder):
    if layout == "lm":
        model.save_pretrained(folder, safe_serialization=True)
        return
    assert family == "gpt2" and model.config.tie_word_embeddings
    model.transformer.save_pretrained(folder, safe_serialization=True)
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    n = model.config.n_positions
    for i in range(model.config.n_layer):
        tensors[f"h.{i}.attn.bias"] = torch.ones(n, n).tril().view(1, 1, n, n)
    save_file(tensors, path, metadata={"format": "pt"})


def grads(args):
    with open(args.config) as f:
        kwargs = json.load(f)
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    model = build(args.family, kwargs, dtype, args.seed)
    save(model, args.family, args.layout, os.path.join(args.out, "hf"))
    apply_variant(model, args.family, args.variant)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.randint(0, vocab, (args.batch, args.seq + 1), generator=gen)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    prompt = torch.randint(0, vocab, (1, args.prompt), generator=gen)
    result = forward_backward(model, inputs, targets)
    noise, exact = self_noise(model, result, inputs, targets)
    result.update({k: torch.tensor(v, dtype=torch.float64) for k, v in noise.items()})
    if args.dtype == "float64":  # the same model with no float32 step: a float64-tight check
        result.update({"exact." + k: v for k, v in exact.items()})
    result["generated"] = greedy(model, prompt, args.new_tokens)
    save_file({"inputs": inputs, "targets": targets, "prompt": prompt},
              os.path.join(args.out, "input.safetensors"))
    save_file({k: v.contiguous() for k, v in result.items()},
              os.path.join(args.out, "reference.safetensors"))
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                      "class": type(model).__name__, "dtype": args.dtype, **noise,
                      "generated": result["generated"][0].tolist()}))


def padded(args):
    """Greedy generate() of prompts of several lengths in one left-padded batch."""
    with open(args.config) as f:
        kwargs = json.load(f)
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    model = build(args.family, kwargs, dtype, args.seed)
    save(model, args.family, "lm", os.path.join(args.out, "hf"))
    lengths = [int(n) for n in args.lengths.split(",")]
    gen = torch.Generator().manual_seed(args.seed + 1)
    prompts = [torch.randint(0, model.config.vocab_size, (n,), generator=gen) for n in lengths]
    longest = max(lengths)
    ids = torch.zeros(len(prompts), longest, dtype=torch.long)
    mask = torch.zeros(len(prompts), longest, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, longest - len(p):] = p
        mask[i, longest - len(p):] = 1
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                             max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                             eos_token_id=None, pad_token_id=0)
    generated = out[:, longest:].contiguous()
    tensors = {f"prompt.{i}": p for i, p in enumerate(prompts)}
    tensors["generated"] = generated
    save_file(tensors, os.path.join(args.out, "padded.safetensors"))
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                      "class": type(model).__name__, "dtype": args.dtype, "lengths": lengths,
                      "generated": generated.tolist()}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("command", choices=["grads", "padded"])
    p.add_argument("--family", choices=sorted(FAMILIES), required=True)
    p.add_argument("--config", required=True, help="JSON object of the config's arguments")
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt", type=int, default=5, help="prompt length in tokens")
    p.add_argument("--new_tokens", type=int, default=16)
    p.add_argument("--variant", choices=["hf", "interleaved_rotary", "unscaled", "no_qkv_bias"], default="hf")
    p.add_argument("--layout", choices=["lm", "hub"], default="lm")
    p.add_argument("--lengths", default="1,5,17", help="padded: the prompts' lengths")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(max(1, args.threads))
    {"grads": grads, "padded": padded}[args.command](args)


if __name__ == "__main__":
    main()
