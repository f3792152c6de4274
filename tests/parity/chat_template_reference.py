"""Reference for gpulab's built-in chat formats (tests/train/chat_format_test.cpp): renders the
cases on stdin (JSON: a list of {format, messages, add_generation_prompt}) with transformers'
apply_chat_template and the models' own templates, and prints the texts as a JSON list."""
import json
import sys

from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

# Meta-Llama-3-8B-Instruct's chat_template (tokenizer_config.json).
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
          "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
          "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
          "{% endif %}")
# ChatML, as the ChatML models' templates write it.
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()),
                              bos_token="<|begin_of_text|>")
out = []
for case in json.load(sys.stdin):
    out.append(tok.apply_chat_template(
        case["messages"], chat_template=LLAMA3 if case["format"] == "llama3" else CHATML,
        tokenize=False, add_generation_prompt=case["add_generation_prompt"]))
json.dump(out, sys.stdout)
