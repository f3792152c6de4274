"""What Hugging Face makes of a SentencePiece model's tokenizer.json that gpulab wrote.

The `tokenizers` library reads the file itself (--tokenizer_json), or transformers' AutoTokenizer
reads the folder it is in (--folder, as a user loads a run folder); each text of --texts (a JSON
list of strings) is encoded without special tokens and decoded back. Prints one JSON line:
{"reader": ..., "ids": [[...], ...], "decoded": [...]}. Used by tests/train/hf_sentencepiece_test.cpp.
"""
import argparse
import json

parser = argparse.ArgumentParser()
source = parser.add_mutually_exclusive_group(required=True)
source.add_argument("--tokenizer_json")
source.add_argument("--folder")
parser.add_argument("--texts", required=True)
args = parser.parse_args()

with open(args.texts, encoding="utf-8") as f:
    texts = json.load(f)

if args.tokenizer_json:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer_json)
    ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    decoded = [tok.decode(i, skip_special_tokens=False) for i in ids]
    reader = "tokenizers.Tokenizer"
else:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.folder)
    ids = [tok(t, add_special_tokens=False).input_ids for t in texts]
    decoded = [tok.decode(i) for i in ids]
    reader = "AutoTokenizer:" + type(tok).__name__

print(json.dumps({"reader": reader, "ids": ids, "decoded": decoded}))
