#!/usr/bin/python3
# Reference for the `grpo` case of bench/compare: whole GRPO steps of TRL's GRPOTrainer (PyPI,
# transformers' generate, no vLLM) on the CPU, on the folder, prompts and lengths gpulab's side
# reads (bench/grpo_gpulab.py). Prints one JSON line: the median seconds of a step after the
# warm-up (sampling, rewards and the optimizer step, timed by a TrainerCallback), the mean
# completion length, and completion tokens per second of a step.
# `--make DIR` first writes a random llama-tiny model, a byte-level BPE tokenizer.json (trained by
# Hugging Face tokenizers on sums text, EOS "<|endoftext|>") and DIR/prompts.jsonl ("a+b=" with
# the answer): the folder both sides then read.
# TRL is not in the project's pinned environment (it pulls datasets, pandas, pyarrow): bench/compare
# runs this script with the bench's own overlay environment (scripts/install-bench-trl.sh).
import argparse, json, os, random, statistics, sys, time

p = argparse.ArgumentParser()
p.add_argument("--weights", required=True, help="folder: config.json, model.safetensors, tokenizer")
p.add_argument("--make", action="store_true", help="write the model, tokenizer and prompts first")
p.add_argument("--prompts_per_step", type=int, default=4)
p.add_argument("--group", type=int, default=8)
p.add_argument("--new_tokens", type=int, default=32)
p.add_argument("--steps", type=int, default=5, help="timed steps")
p.add_argument("--warmup", type=int, default=2)
a = p.parse_args()

import torch  # noqa: E402

if a.make:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
    rng = random.Random(0)
    sums = [(rng.randint(0, 99), rng.randint(0, 99)) for _ in range(4000)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([f"{x}+{y}={x + y} the sum of {x} and {y}" for x, y in sums], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=256, intermediate_size=688,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      eos_token_id=fast.eos_token_id, bos_token_id=fast.eos_token_id,
                      pad_token_id=fast.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(a.weights, safe_serialization=True)
    fast.save_pretrained(a.weights)
    with open(os.path.join(a.weights, "prompts.jsonl"), "w") as f:
        for x, y in sums[:256]:
            f.write(json.dumps({"prompt": f"{x}+{y}=", "answer": x + y}) + "\n")
    sys.exit(0)

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
import trl  # noqa: E402
import re  # noqa: E402

rows = [json.loads(line) for line in open(os.path.join(a.weights, "prompts.jsonl"))]
data = Dataset.from_list(rows)


def answer_reward(completions, answer, **_):
    """gpulab's `answer` reward with its defaults: the last number in the completion equals the
    prompt's answer numerically (1e-6), else 0."""
    out = []
    for text, want in zip(completions, answer):
        nums = re.findall(r"-?\d+(?:\.\d+)?", text)
        out.append(1.0 if nums and abs(float(nums[-1]) - float(want)) <= 1e-6 else 0.0)
    return out


def digits_reward(completions, **_):
    """gpulab's `regex` reward with --reward_regex '^\\d' (weight 0.2 in the trainer's
    reward_weights): a random policy's groups then have rewards that differ, so both sides train
    on nonzero advantages (all-zero rewards would leave a step nothing to learn)."""
    return [1.0 if re.search(r"^\d", text) else 0.0 for text in completions]


class StepTimer(TrainerCallback):
    def __init__(self):
        self.times, self.t0 = [], 0.0

    def on_step_begin(self, args, state, control, **kw):
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.times.append(time.perf_counter() - self.t0)


lengths = []


class Lengths(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kw):
        if logs and "completions/mean_length" in logs:
            lengths.append(logs["completions/mean_length"])


out_dir = os.path.join(a.weights, "trl-run")
cfg = GRPOConfig(output_dir=out_dir, use_cpu=True, bf16=False, num_generations=a.group,
                 per_device_train_batch_size=a.group * a.prompts_per_step,
                 max_completion_length=a.new_tokens, max_steps=a.warmup + a.steps,
                 logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True,
                 temperature=1.0, seed=0, reward_weights=[1.0, 0.2])
model = AutoModelForCausalLM.from_pretrained(a.weights, dtype=torch.float32)
timer = StepTimer()
trainer = GRPOTrainer(model=model, reward_funcs=[answer_reward, digits_reward], args=cfg, train_dataset=data,
                      processing_class=AutoTokenizer.from_pretrained(a.weights),
                      callbacks=[timer, Lengths()])
trainer.train()
sec = statistics.median(timer.times[a.warmup:])
length = statistics.mean(lengths[a.warmup:]) if lengths else float("nan")
print(json.dumps({"trl": trl.__version__, "torch": torch.__version__, "seconds_per_step": sec,
                  "completion_length": length,
                  "tokens_per_second": a.group * a.prompts_per_step * length / sec}))
