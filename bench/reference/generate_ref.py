#!/usr/bin/python3
# Reference for `gpulab bench generate`: Hugging Face transformers' own `generate` (greedy,
# KV cache, the model's default attention) on the same folder, prompt and lengths. Prints one
# JSON line: new tokens/s of the median timed run, and the tokens (greedy: gpulab must agree).
# --prompt_lengths 1,5,17 --group G: GRPO's batch, as `gpulab bench generate --prompt_lengths`
# runs it: one prompt of each length (src/bench/generate_bench.cpp's bench_prompts), each
# repeated G times (as TRL repeats prompts), left-padded with an attention mask, in one generate().
# `--make DIR --shape llama-125m` first writes a random model of that shape there
# (save_pretrained: config.json + model.safetensors), the folder both sides then read.
import argparse, json, os, statistics, sys, time
import torch

SHAPES = {  # gpulab models (src/formats/decoder_config.cpp); vocabulary of --dataset synthetic-text
    "llama-tiny": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=8),
    "llama-125m": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                       num_attention_heads=12, num_key_value_heads=4),
}
p = argparse.ArgumentParser()
p.add_argument("--weights", required=True, help="folder with config.json and model.safetensors")
p.add_argument("--make", action="store_true", help="write a random model of --shape there first")
p.add_argument("--shape", default="llama-125m", choices=sorted(SHAPES))
p.add_argument("--vocab_size", type=int, default=32000)
p.add_argument("--prompt_tokens", type=int, default=32)
p.add_argument("--new_tokens", type=int, default=128)
p.add_argument("--warmup", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--threads", type=int, default=0)
p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (gpulab bench generate's --device)")
p.add_argument("--prompt_lengths", default="", help="rollout mode: prompt lengths, comma-separated")
p.add_argument("--group", type=int, default=1, help="rollout mode: rows per prompt")
a = p.parse_args()

from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM  # noqa: E402

if a.make:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=a.vocab_size, max_position_embeddings=2048, rms_norm_eps=1e-5,
                      tie_word_embeddings=False, **SHAPES[a.shape])
    LlamaForCausalLM(cfg).save_pretrained(a.weights, safe_serialization=True)
    sys.exit(0)
if a.threads > 0:
    torch.set_num_threads(a.threads)
model = AutoModelForCausalLM.from_pretrained(a.weights, dtype=torch.float32).eval().to(a.device)
vocab = model.config.vocab_size
# The prompts of src/bench/generate_bench.cpp (bench_prompt, bench_prompts).
def bench_prompt(n, shift):
    return [((i * 7919 + 13) % vocab + shift * 7919) % vocab for i in range(n)]


if a.prompt_lengths:
    lengths = [int(n) for n in a.prompt_lengths.split(",")]
    longest = max(lengths)
    rows = [bench_prompt(n, i) for i, n in enumerate(lengths) for _ in range(a.group)]
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(rows):
        ids[r, longest - len(p):] = torch.tensor(p)
        mask[r, longest - len(p):] = 1
else:
    longest = a.prompt_tokens
    ids = torch.tensor([bench_prompt(a.prompt_tokens, 0)])
    mask = torch.ones_like(ids)
# No end-of-sequence token: every run makes exactly new_tokens, as gpulab's (min_new_tokens would
# mask the EOS logit and change the greedy choice).
model.generation_config.eos_token_id = None
ids, mask = ids.to(a.device), mask.to(a.device)
kw = dict(max_new_tokens=a.new_tokens, do_sample=False, use_cache=True, pad_token_id=0,
          attention_mask=mask)
with torch.inference_mode():
    for _ in range(a.warmup):
        model.generate(ids, **kw)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        out = model.generate(ids, **kw)
        if out.is_cuda:
            torch.cuda.synchronize()  # the timed run ends when the device's queue does
        times.append(time.perf_counter() - t0)
sec = statistics.median(times)
new_tokens = out[:, longest:]
print(json.dumps({"torch": torch.__version__, "seconds": sec,
                  "tokens_per_second": ids.shape[0] * a.new_tokens / sec,
                  "tokens": new_tokens[0].tolist() if not a.prompt_lengths else new_tokens.tolist()}))
