#!/usr/bin/python3
"""transformers reads a gpulab run folder: the round trip's reference side.

  hf_roundtrip.py RUN_DIR OUT_DIR --prompt TEXT --new_tokens N [--max_shard_size SIZE]

Loads RUN_DIR with AutoModelForCausalLM.from_pretrained (float32, and again in float64 to
measure float32's own rounding) and, where the folder has a tokenizer, AutoTokenizer; runs the
model on fixed token ids and greedy generate() on the prompt's. Writes OUT_DIR/reference.safetensors
(ids, logits, prompt, generated, noise.logits) and OUT_DIR/hf/ (save_pretrained of the model
transformers loaded, in shards of SIZE where given, for gpulab to read back). Prints one JSON line
of facts (the weights' safetensors metadata, the files they were read from, the config's token ids,
what from_pretrained reported missing or unused).
"""
import argparse
import json
import os

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("out_dir")
    p.add_argument("--prompt", default="ab")
    p.add_argument("--new_tokens", type=int, default=12)
    p.add_argument("--seq", type=int, default=24)
    p.add_argument("--max_shard_size", default=None)
    a = p.parse_args()
    index = os.path.join(a.run_dir, "model.safetensors.index.json")
    if os.path.exists(os.path.join(a.run_dir, "model.safetensors")) or not os.path.exists(index):
        weight_files = ["model.safetensors"]
    else:
        with open(index) as f:
            weight_files = sorted(set(json.load(f)["weight_map"].values()))
    with safe_open(os.path.join(a.run_dir, weight_files[0]), "pt") as f:
        metadata = f.metadata()
    model, info = AutoModelForCausalLM.from_pretrained(a.run_dir, dtype=torch.float32,
                                                       output_loading_info=True)
    model.eval()
    vocab = model.config.vocab_size
    torch.manual_seed(0)
    ids = torch.randint(0, vocab, (2, a.seq))
    with torch.no_grad():
        logits = model(ids).logits
        exact = AutoModelForCausalLM.from_pretrained(a.run_dir, dtype=torch.float64).eval()
        noise = (logits.double() - exact(ids).logits).norm() / exact(ids).logits.norm()
    facts = {"metadata": metadata, "weight_files": weight_files, "missing": sorted(info["missing_keys"]),
             "unexpected": sorted(info["unexpected_keys"]),
             "mismatched": [str(m) for m in info["mismatched_keys"]],
             "bos_token_id": model.config.bos_token_id, "eos_token_id": model.config.eos_token_id,
             "pad_token_id": model.config.pad_token_id, "vocab_size": vocab,
             "model_class": type(model).__name__, "tokenizer": None}
    if os.path.exists(os.path.join(a.run_dir, "tokenizer_config.json")):
        tok = AutoTokenizer.from_pretrained(a.run_dir)
        prompt = tok(a.prompt, add_special_tokens=False)["input_ids"]
        facts["tokenizer"] = type(tok).__name__
    else:
        prompt = list(a.prompt.encode("utf-8"))
    prompt_t = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(prompt_t, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                             do_sample=False, pad_token_id=0)
    generated = out[0, len(prompt):]
    if facts["tokenizer"]:
        facts["decoded"] = tok.decode(out[0].tolist())
    save_file({"ids": ids, "logits": logits.contiguous(), "prompt": prompt_t[0],
               "generated": generated.contiguous(),
               "noise.logits": torch.tensor(noise.item(), dtype=torch.float64)},
              os.path.join(a.out_dir, "reference.safetensors"))
    if a.max_shard_size:
        model.save_pretrained(os.path.join(a.out_dir, "hf"), max_shard_size=a.max_shard_size)
    else:
        model.save_pretrained(os.path.join(a.out_dir, "hf"))
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
