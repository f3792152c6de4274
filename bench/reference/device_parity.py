#!/usr/bin/python3
# Device parity against independent references (issue 44 item 3): PyTorch itself running the same
# model on the same device, not gpulab's own fp64 model. Two checks:
#  - ResNet-18 (torchvision, random weights, seed 0) logits of 4 images of 64 px: gpulab `infer`
#    against torchvision on the device, both measured against torchvision in fp64 on the CPU; gpulab
#    passes when its error is within 4x the reference's own error on that device (each side runs
#    libtorch's default kernels there, cuDNN's TF32 convolutions included, so the device's own
#    rounding sets the scale, not a fixed number).
#  - llama-tiny (transformers, random weights): 32 greedy tokens of `gpulab bench generate` equal
#    to transformers' `generate` on the device.
# Prints one JSON line and exits 1 on a failed check. `--device cpu` runs the same on the CPU (the
# plumbing's own check here; on a CPU machine the device row cannot be judged: needs_gpu_test.sh
# skips it).
import argparse, json, os, struct, subprocess, sys, tempfile

p = argparse.ArgumentParser()
p.add_argument("--gpulab", required=True)
p.add_argument("--device", default="cuda:0")
a = p.parse_args()

import torch  # noqa: E402
import torchvision  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save_safetensors(path, tensors):
    """The safetensors layout (8-byte header length, JSON header, raw little-endian data), written
    here so the check needs no package beyond torch."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def load_safetensors(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        rest = f.read()
    h = header[name]
    begin, end = h["data_offsets"]
    assert h["dtype"] == "F32", h
    return torch.frombuffer(bytearray(rest[begin:end]), dtype=torch.float32).reshape(h["shape"])


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"device_parity: {' '.join(cmd[:3])} exited {done.returncode}: {done.stderr[-800:]}")
    return done.stdout


def resnet_check(work):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1000).eval()
    x = torch.randn(4, 3, 64, 64)
    weights, inputs, out = (os.path.join(work, f) for f in ("w.safetensors", "x.safetensors",
                                                            "y.safetensors"))
    save_safetensors(weights, {k: v for k, v in model.state_dict().items()
                               if v.dtype in DTYPES})
    save_safetensors(inputs, {"input": x})
    with torch.no_grad():
        exact = model.double()(x.double())
        ref = model.float().to(a.device)(x.to(a.device)).double().cpu()
    run([a.gpulab, "infer", "--model", "resnet18", "--weights", weights, "--input", inputs,
         "--device", a.device, "--out", out])
    ours = load_safetensors(out, "output").double()
    scale = exact.abs().max().item()
    ref_err = (ref - exact).abs().max().item() / scale
    our_err = (ours - exact).abs().max().item() / scale
    # 4x: two fp32 runs of one network on one device differ by their kernels' summation orders;
    # a wrong weight, layout or layer is off by orders of magnitude more.
    bound = 4 * max(ref_err, 1e-7)
    return {"resnet18_ref_error": ref_err, "resnet18_gpulab_error": our_err,
            "resnet18_bound": bound, "resnet18_ok": our_err <= bound}


def llama_check(work):
    folder = os.path.join(work, "llama")
    ref = [sys.executable, os.path.join(HERE, "generate_ref.py"), "--weights", folder]
    run(ref + ["--make", "--shape", "llama-tiny"])
    gen = ["--new_tokens", "32", "--reps", "1", "--warmup", "0", "--device", a.device]
    theirs = json.loads(run(ref + gen).strip().splitlines()[-1])["tokens"]
    ours = json.loads(run([a.gpulab, "bench", "generate", "--json", "--weights", folder, *gen])
                      .strip().splitlines()[-1])["tokens"]
    return {"llama_tokens": len(ours), "llama_same_tokens": ours == theirs}


with tempfile.TemporaryDirectory(prefix="gpulab-device-parity-") as work:
    result = {"device": a.device, "torch": torch.__version__, **resnet_check(work),
              **llama_check(work)}
print(json.dumps(result))
sys.exit(0 if result["resnet18_ok"] and result["llama_same_tokens"] else 1)
