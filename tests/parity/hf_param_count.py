#!/usr/bin/python3
"""transformers' parameter count of each config.json gpulab lists: the oracle of the counts.

  hf_param_count.py MODELS.json

MODELS.json is `gpulab models --json`. For each language model its "config" (the config.json
gpulab writes for the shape) is built into transformers' own class (AutoModelForCausalLM for
its model_type) on the meta device, so no weights are allocated (qwen2.5-7b, llama3-70b), and
counted with num_parameters() (tied tables once). Prints one JSON object: name -> count.
"""
import json
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def count(config_json):
    fields = dict(config_json)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return model.num_parameters()


def main():
    with open(sys.argv[1]) as f:
        models = json.load(f)["language_models"]
    print(json.dumps({m["name"]: count(m["config"]) for m in models}))


if __name__ == "__main__":
    main()
