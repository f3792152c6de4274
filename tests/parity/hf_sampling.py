"""transformers' own logits processors on gpulab's logits: the reference for TokenSampler.

  hf_sampling.py IN OUT CASES_JSON

IN holds `logits` [rows, vocab] float32 and `history` [rows, T] int64. For each case i of the JSON
list ({temperature, top_k, top_p, repetition_penalty, seed, draws}) OUT gets `scores.i`: the logits
after the processors generate() would build for those settings (RepetitionPenaltyLogitsProcessor,
TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, in its order; greedy, temperature 0,
applies only the penalty), and for sampled cases `tokens.i` [draws, rows]: torch.multinomial draws
from their softmax with a CPU generator seeded `seed`, one row of draws after another.
"""
import json
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers.generation.logits_process import (LogitsProcessorList,
                                                    RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)


def processors(case):
    # The conditions of GenerationMixin._get_logits_processor.
    out = LogitsProcessorList()
    if case["repetition_penalty"] != 1.0:
        out.append(RepetitionPenaltyLogitsProcessor(penalty=case["repetition_penalty"]))
    if case["temperature"] <= 0:
        return out
    if case["temperature"] != 1.0:
        out.append(TemperatureLogitsWarper(case["temperature"]))
    if case["top_k"] != 0:
        out.append(TopKLogitsWarper(top_k=case["top_k"]))
    if case["top_p"] < 1.0:
        out.append(TopPLogitsWarper(top_p=case["top_p"]))
    return out


def main():
    inputs = load_file(sys.argv[1])
    logits, history = inputs["logits"], inputs["history"]
    result = {}
    for i, case in enumerate(json.loads(sys.argv[3])):
        scores = processors(case)(history, logits.clone())
        result[f"scores.{i}"] = scores.contiguous()
        if case["temperature"] > 0:
            gen = torch.Generator().manual_seed(case["seed"])
            probs = scores.softmax(-1)
            draws = [torch.multinomial(probs, 1, generator=gen).squeeze(1)
                     for _ in range(case["draws"])]
            result[f"tokens.{i}"] = torch.stack(draws).contiguous()
    save_file(result, sys.argv[2])


if __name__ == "__main__":
    main()
