#!/usr/bin/python3
# Reference for `gpulab bench train`: torchvision model + DataLoader training, written the way
# PyTorch's docs recommend (DataLoader workers, zero_grad(set_to_none), channels_last and AMP
# where asked), measuring steady-state images/s after warm-up, data time vs compute time, and
# peak host memory. Runs as one process, or under torchrun with DistributedDataParallel.
import argparse, gc, json, os, pickle, resource, sys, time
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--model", default="resnet18")
p.add_argument("--data_dir", default="", help="cifar-10-batches-py folder; empty = synthetic")
p.add_argument("--num_classes", type=int, default=10)
p.add_argument("--batch_size", type=int, default=128)
p.add_argument("--input_size", type=int, default=32)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
p.add_argument("--channels_last", action="store_true")
p.add_argument("--num_workers", type=int, default=2)
p.add_argument("--device", default="cpu")
a = p.parse_args()

world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
dev = torch.device(a.device)
if world > 1:
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    if dev.type == "cuda":
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(dev)
if dev.type == "cpu":
    # torch reports 1 thread here unless told; give each rank its share of the cores.
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))


def load_cifar(d):
    xs, ys = [], []
    for f in sorted(os.listdir(d)):
        if f.startswith("data_batch"):
            with open(os.path.join(d, f), "rb") as fh:
                b = pickle.load(fh, encoding="bytes")
            xs.append(np.asarray(b[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            ys.append(np.asarray(b[b"labels"], dtype=np.int64))
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


if a.data_dir:
    images, labels = load_cifar(a.data_dir)
else:
    g = torch.Generator().manual_seed(0)
    n = a.batch_size * world * (a.steps + a.warmup)
    images = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, a.num_classes, (n,), generator=g)

mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return len(labels)

    def __getitem__(self, i):
        x = images[i].float().div_(255)
        if torch.rand(1).item() < 0.5:
            x = x.flip(2)
        if a.input_size != 32:
            x = torch.nn.functional.interpolate(x[None], size=a.input_size, mode="bilinear",
                                                align_corners=False)[0]
        return (x - mean) / std, labels[i]


ds = Data()
sampler = torch.utils.data.distributed.DistributedSampler(ds) if world > 1 else None
loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=sampler is None,
                                     sampler=sampler, num_workers=a.num_workers, drop_last=True,
                                     pin_memory=dev.type == "cuda", persistent_workers=a.num_workers > 0)
model = getattr(torchvision.models, a.model)(num_classes=a.num_classes).to(dev)
if a.channels_last:
    model = model.to(memory_format=torch.channels_last)
if world > 1:
    model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
crit = nn.CrossEntropyLoss()
amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
scaler = torch.cuda.amp.GradScaler(enabled=a.precision == "fp16")
sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)

model.train()
data_t = compute_t = 0.0
measured = 0
it = iter(loader)
t_end = time.perf_counter()
for step in range(a.warmup + a.steps):
    x, y = next(it)
    t_data = time.perf_counter()
    x = x.to(dev, non_blocking=True)
    y = y.to(dev, non_blocking=True)
    if a.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.autocast(device_type=dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        loss = crit(model(x), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    sync()
    t_done = time.perf_counter()
    if step >= a.warmup:
        data_t += t_data - t_end
        compute_t += t_done - t_data
        measured += 1
    t_end = t_done

total = data_t + compute_t
imgs = measured * a.batch_size * world
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = {"images_per_second": imgs / total, "data_seconds": data_t, "compute_seconds": compute_t,
       "steps": measured, "world_size": world, "peak_host_memory_bytes": peak_kib * 1024,
       "loss": float(loss.detach()), "torch": torch.__version__}
if dev.type == "cuda":
    out["peak_device_memory_bytes"] = torch.cuda.max_memory_allocated(dev)
if rank == 0:
    print(json.dumps(out))
if world > 1:
    dist.destroy_process_group()
# Shut the workers down before exit (after the measurement): workers killed at interpreter exit
# leave their pymp-* folders in the temporary folder.
del it
del loader
gc.collect()
if world > 1:  # past Gloo's exit-time abort (see llm_ref.py), the workers already shut down
    sys.stdout.flush()
    os._exit(0)
