#!/usr/bin/python3
"""torchvision reference for gpulab's model zoo parity tests.

Builds a torchvision model, exports its state dict and a random input as safetensors (with a
tiny writer of our own: the `safetensors` package is not in Debian), runs it, and writes the
outputs (eval mode) or the loss, outputs and every parameter's gradient (train mode, one batch,
dropout and stochastic depth off). Also counts parameters for a list of models.

  reference.py counts MODEL[,MODEL...]                 -> JSON {model: {"1000": n, "100": n}}
  reference.py export --model M --out DIR [--num_classes K] [--image_size S] [--batch N]
                      [--seed X] [--grads] [--double]
  reference.py run --model M --weights W --input X --out Y [--model ...] [--num_classes K]
                   [--image_size S]                    (several models: one torch import)
"""
import argparse
import json
import struct
import sys

import numpy as np
import torch
import torchvision

_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
           torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32", torch.int16: "I16",
           torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}
_NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def save_safetensors(tensors, path):
    """Writes {name: tensor} as safetensors: u64 header length, JSON header, raw LE data."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load_safetensors(path):
    """Reads a safetensors file into {name: torch.Tensor}."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if e["dtype"] == "BF16":
            arr = np.frombuffer(body[b:end], dtype=np.int16).reshape(e["shape"])
            out[name] = torch.from_numpy(arr.copy()).view(torch.bfloat16)
        else:
            arr = np.frombuffer(body[b:end], dtype=_NUMPY[e["dtype"]]).reshape(e["shape"])
            out[name] = torch.from_numpy(arr.copy())
    return out


def build(name, num_classes, image_size=None):
    kwargs = {"num_classes": num_classes}
    if name.startswith("vit_") and image_size:
        kwargs["image_size"] = image_size  # ViT's position table depends on it
    return torchvision.models.__dict__[name](weights=None, **kwargs)


def randomize_norm_stats(model, gen):
    """Fresh BatchNorm/LayerNorm statistics and affines, so the check sees every buffer."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)
                m.num_batches_tracked.fill_(int(torch.randint(1, 1000, (1,), generator=gen)))
            if isinstance(m, (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm)):
                if m.weight is not None:
                    m.weight.add_(torch.randn(m.weight.shape, generator=gen) * 0.1)
                    m.bias.add_(torch.randn(m.bias.shape, generator=gen) * 0.1)


def randomize_constant_params(model, gen):
    """Zero or constant initialisations (ViT's head and class token, ConvNeXt's layer scale)
    would hide a wrong layer behind a constant output; give them values."""
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 0 and bool((p == p.reshape(-1)[0]).all()):
                p.add_(torch.randn(p.shape, generator=gen) * 0.05)


def no_dropout(model):
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout) or type(m).__name__ == "StochasticDepth":
            m.p = 0.0
        if hasattr(m, "dropout") and isinstance(m.dropout, float):
            m.dropout = 0.0  # ViT's MLP/attention store floats; harmless elsewhere


def export(args):
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    model = build(args.model, args.num_classes, args.image_size)
    randomize_norm_stats(model, gen)
    randomize_constant_params(model, gen)
    x = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=gen)
    if args.double:
        # Gradients through train-mode BatchNorm on tiny feature maps are ill-conditioned:
        # float32 rounding alone moves them by more than 1e-4, so compare in float64.
        model.double()
        x = x.double()
    save_safetensors(model.state_dict(), f"{args.out}/weights.safetensors")
    inputs = {"input": x}
    if args.grads:
        labels = torch.randint(0, args.num_classes, (args.batch,), generator=gen)
        inputs["labels"] = labels
        no_dropout(model)
        model.train()
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, labels)
        loss.backward()
        result = {"output": out, "loss": loss.detach().reshape([])}
        for name, p in model.named_parameters():
            result["grad." + name] = p.grad if p.grad is not None else torch.zeros_like(p)
        for name, b in model.named_buffers():
            result["buffer." + name] = b  # running statistics after one training step
    else:
        model.eval()
        with torch.no_grad():
            result = {"output": model(x)}
    save_safetensors(inputs, f"{args.out}/input.safetensors")
    save_safetensors(result, f"{args.out}/reference.safetensors")


def skip_init():
    """Only shapes matter to a model built to count or to load every value: skip the random
    initialisation, which dominates build time."""
    for fn in [n for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")]:
        setattr(torch.nn.init, fn, lambda t, *a, **k: t)


def run(args):
    """Loads weights written by gpulab (strict: every name and shape) and runs eval; each
    --model with its own --weights, --input and --out, in one process (one torch import)."""
    jobs = [args.model, args.weights, args.input, args.out]
    if len({len(j) for j in jobs}) != 1:
        sys.exit("run: give each --model its --weights, --input and --out")
    skip_init()  # the strict load below sets every parameter and buffer
    for name, weights, inp, out in zip(*jobs):
        model = build(name, args.num_classes, args.image_size)
        model.load_state_dict(load_safetensors(weights), strict=True)
        model.eval()
        x = load_safetensors(inp)["input"]
        with torch.no_grad():
            save_safetensors({"output": model(x)}, out)
        del model


def counts(names):
    """Parameter counts need shapes only: built on the meta device, no memory is allocated or
    initialised (vit_h_14 alone is 632 M values)."""
    out = {}
    for name in names:
        out[name] = {}
        for k in (1000, 100):
            with torch.device("meta"):
                model = build(name, k)
            out[name][str(k)] = sum(p.numel() for p in model.parameters())
            del model
    json.dump(out, sys.stdout)


def main():
    torch.set_num_threads(max(1, torch.get_num_threads()))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("counts")
    c.add_argument("models")
    e = sub.add_parser("export")
    e.add_argument("--model", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--num_classes", type=int, default=10)
    e.add_argument("--image_size", type=int, default=32)
    e.add_argument("--batch", type=int, default=2)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--grads", action="store_true")
    e.add_argument("--double", action="store_true", help="float64 weights, input and outputs")
    r = sub.add_parser("run")
    for flag in ("--model", "--weights", "--input", "--out"):
        r.add_argument(flag, required=True, action="append")
    r.add_argument("--num_classes", type=int, default=1000)
    r.add_argument("--image_size", type=int, default=None)
    args = p.parse_args()
    if args.cmd == "counts":
        counts(args.models.split(","))
    elif args.cmd == "run":
        run(args)
    else:
        export(args)


if __name__ == "__main__":
    main()
