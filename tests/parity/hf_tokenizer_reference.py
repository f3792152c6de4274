"""Reference for gpulab's tokenizer.json reader (tests/train/hf_tokenizer_parity_test.cpp).

Builds a mixed corpus of at least --min_bytes (English from Debian's licenses and fortunes, C and
Python source, generated Chinese, emoji, numbers, whitespace runs, decomposed accents, special
tokens), trains one small byte-level BPE per style with Hugging Face `tokenizers` itself (GPT-2,
Llama 3, Qwen2: each style's pre-tokenizer expression, normalizer and special tokens), and writes
per style: tokenizer.json, the ids `tokenizers` gives the corpus (int32 little-endian) and its
encode time. Nothing is downloaded.
"""
import argparse
import glob
import json
import os
import random
import struct
import time
import unicodedata

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers.trainers import BpeTrainer

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# Llama 3 (transformers' convert_slow_tokenizer: digit groups of 1-3) and Qwen2 (transformers'
# tokenization_qwen2.py: single digits).
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

WITH_SPECIALS = "Hello, world! 42"
SPECIALS = {
    "gpt2": ["<|endoftext|>"],
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
               "<|end_header_id|>", "<|eot_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
}


def read_text(paths, budget):
    out, n = [], 0
    for p in sorted(paths):
        if n >= budget:
            break
        try:
            with open(p, "rb") as f:
                t = f.read(200_000).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        out.append(t)
        n += len(t.encode())
    return "\n".join(out)


def generated(rng, n_bytes):
    """Chinese, emoji, numbers, whitespace runs and decomposed accents from a fixed seed."""
    parts, n = [], 0
    spaces = [" ", "  ", "\t", "\n", "\n\n", "\r\n", "   \n", " \t ", "\u00a0", "\u3000", "    "]
    while n < n_bytes:
        k = rng.randrange(7)
        if k == 0:
            s = "".join(chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(rng.randrange(2, 40)))
            s += rng.choice(["，", "。", "！", "？", "、", ""])
        elif k == 1:
            s = "".join(chr(rng.randrange(0x1F300, 0x1F650)) for _ in range(rng.randrange(1, 6)))
            if rng.random() < 0.3:  # a ZWJ family and a skin tone
                s += "\U0001F468\u200D\U0001F469\u200D\U0001F467" + "\U0001F44D\U0001F3FD"
        elif k == 2:
            s = rng.choice([str(rng.randrange(10 ** rng.randrange(1, 15))),
                            f"{rng.uniform(-1e6, 1e6):.{rng.randrange(0, 8)}f}",
                            f"{rng.randrange(1000, 2100)}-{rng.randrange(1, 13):02d}"])
        elif k == 3:
            s = "".join(rng.choice(spaces) for _ in range(rng.randrange(1, 6)))
        elif k == 4:  # decomposed accents: NFC changes them (Qwen2's normalizer)
            s = "".join(rng.choice(["e\u0301", "a\u0300", "o\u0308", "n\u0303", "c\u0327", "é"])
                        + rng.choice("tlrs") for _ in range(rng.randrange(1, 5)))
        elif k == 5:
            s = rng.choice(["I'm", "we'LL", "it's", "They'RE", "don't", "x'd"])
        else:
            s = rng.choice(sum(SPECIALS.values(), [])) + rng.choice(["", "\n", " "])
        parts.append(s + rng.choice(["", " ", " ", "\n"]))
        n += len(parts[-1].encode())
    return "".join(parts)


def corpus(min_bytes, seed):
    rng = random.Random(seed)
    english = read_text(glob.glob("/usr/share/common-licenses/*") +
                        [p for p in glob.glob("/usr/share/games/fortunes/*")
                         if "." not in os.path.basename(p)], min_bytes * 4 // 10)
    code = read_text(glob.glob("/usr/include/*.h"), min_bytes * 2 // 10)
    code += read_text(glob.glob("/usr/lib/python3*/*.py"), min_bytes * 15 // 100)
    text = english + "\n" + code + "\n"
    # Interleave the generated text with the real text in blocks, so every style sees them mixed.
    gen = generated(rng, max(min_bytes - len(text.encode()), min_bytes // 4) + 1)
    out, i, j = [], 0, 0
    while i < len(text) or j < len(gen):
        out.append(text[i:i + 4000])
        out.append(gen[j:j + 1500])
        i, j = i + 4000, j + 1500
    return "".join(out)


def build(style, vocab_size, text):
    specials = SPECIALS[style]
    tok = Tokenizer(models.BPE(ignore_merges=(style == "llama3")))
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if style == "llama3" else QWEN2),
                                 behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if style == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    if style == "llama3":
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])
    trainer = BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text[k:k + 10000] for k in range(0, len(text), 10000)], trainer)
    return tok


def code_point_cases():
    """One short text per code point of planes 0-3 (where Unicode assigns letters and numbers),
    each code point beside letters, digits, an apostrophe and spaces: where the expression engines'
    Unicode tables disagree, these texts pre-tokenize differently."""
    cps = [c for c in range(1, 0x32400) if not 0xD800 <= c <= 0xDFFF]
    return cps, [f"a{chr(c)}'s {chr(c)}1{chr(c)}  " for c in cps]


def write_code_point_ids(tok, d, texts):
    encs = tok.encode_batch(texts, add_special_tokens=False)
    with open(os.path.join(d, "cp_lengths.bin"), "wb") as f:
        f.write(struct.pack(f"<{len(encs)}i", *[len(e.ids) for e in encs]))
    flat = [i for e in encs for i in e.ids]
    with open(os.path.join(d, "cp_ids.bin"), "wb") as f:
        f.write(struct.pack(f"<{len(flat)}i", *flat))


def encode_corpus(tok, style, d, text):
    tok.encode(text[:20000], add_special_tokens=False)  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    ids = tok.encode(text, add_special_tokens=False).ids
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    with open(os.path.join(d, "ids.bin"), "wb") as f:
        f.write(struct.pack(f"<{len(ids)}i", *ids))
    with open(os.path.join(d, "with_specials.bin"), "wb") as f:  # what a prompt starts with
        s = tok.encode(WITH_SPECIALS, add_special_tokens=True).ids
        f.write(struct.pack(f"<{len(s)}i", *s))
    with open(os.path.join(d, "hf.json"), "w") as f:
        # Qwen2's NFC normalizer makes its decode give the NFC of the text.
        want = unicodedata.normalize("NFC", text) if style == "qwen2" else text
        json.dump({"seconds": seconds, "cpu_seconds": cpu_seconds, "tokens": len(ids),
                   "bytes": len(text.encode()), "vocab": tok.get_vocab_size(),
                   "roundtrip": tok.decode(ids, skip_special_tokens=False) == want}, f)


def write_legacy_gpt2(d, text):
    """GPT-2's tokenizer.json as the hub holds it: merges as "a b" strings (tokenizers < 0.20)
    and <|endoftext|> marked normalized. `tokenizers` must give it the same ids."""
    with open(os.path.join(d, "tokenizer.json")) as f:
        j = json.load(f)
    j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
    for t in j["added_tokens"]:
        t["normalized"] = True
    legacy = os.path.join(os.path.dirname(d), "gpt2_legacy")
    os.makedirs(legacy, exist_ok=True)
    with open(os.path.join(legacy, "tokenizer.json"), "w") as f:
        json.dump(j, f)
    a, b = Tokenizer.from_file(os.path.join(d, "tokenizer.json")), Tokenizer.from_str(json.dumps(j))
    sample = text[:300_000]
    assert a.encode(sample, add_special_tokens=False).ids == b.encode(sample, add_special_tokens=False).ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--styles", default="gpt2,llama3,qwen2")
    ap.add_argument("--code_points", action="store_true",
                    help="instead of encoding the corpus, the one-text-per-code-point cases")
    ap.add_argument("--min_bytes", type=int, default=1_000_000)
    ap.add_argument("--vocab_size", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    text = corpus(a.min_bytes, a.seed)
    with open(os.path.join(a.out, "corpus.txt"), "wb") as f:
        f.write(text.encode())
    with open(os.path.join(a.out, "corpus.nfc.txt"), "wb") as f:
        f.write(unicodedata.normalize("NFC", text).encode())
    if a.code_points:
        cps, cp_texts = code_point_cases()
        with open(os.path.join(a.out, "cp.bin"), "wb") as f:
            f.write(struct.pack(f"<{len(cps)}i", *cps))
    for style in a.styles.split(","):
        d = os.path.join(a.out, style)
        os.makedirs(d, exist_ok=True)
        tok = build(style, a.vocab_size, text)
        tok.save(os.path.join(d, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what gpulab reads
        if a.code_points:
            write_code_point_ids(tok, d, cp_texts)
        else:
            encode_corpus(tok, style, d, text)
            if style == "gpt2":
                write_legacy_gpt2(d, text)


if __name__ == "__main__":
    main()
