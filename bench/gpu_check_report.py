#!/usr/bin/env python3
# Turns the raw step outputs of scripts/gpu-check.sh (OUT/steps/) into OUT/gpu-check.json and a
# table on stdout: each gpulab row beside its PyTorch reference, the ratio and the goal of
# issue 27 (GEMM >= 0.97x torch.matmul, each side its faster of two runs; ResNet-50 >= 1.10x
# torchvision; llama-1b MFU >= 45 %).
# usage: gpu_check_report.py OUT
import json, os, re, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_output import json_output  # noqa: E402

out = sys.argv[1]
steps = os.path.join(out, "steps")


def last_json(name):
    """What steps/NAME.out holds as JSON (bench/json_output.py), or None."""
    path = os.path.join(steps, name + ".out")
    return json_output(open(path, errors="replace").read()) if os.path.exists(path) else None


status = {}
if os.path.exists(os.path.join(steps, "status")):
    for line in open(os.path.join(steps, "status")):
        name, rc, secs = line.split()
        status[name] = {"exit": rc if rc == "skipped" else int(rc), "seconds": int(secs)}

rows = []


def row(case, metric, ours, ref, goal=None, higher=True, unit=""):
    ratio = ours / ref if ours is not None and ref not in (None, 0) else None
    met = None
    if goal is not None and ratio is not None:
        met = ratio >= goal if higher else ratio <= goal
    rows.append({"case": case, "metric": metric, "gpulab": ours, "reference": ref,
                 "ratio": ratio, "goal": goal, "met": met, "unit": unit})


def get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return d


def fastest(names):
    """The run with the most GFLOPS among steps NAMES (gpu-check runs each side twice, ABBA)."""
    runs = [r for r in (last_json(n) for n in names) if get(r, "average_gflops") is not None]
    return max(runs, key=lambda r: r["average_gflops"]) if runs else None, \
        [r["average_gflops"] / 1e3 for r in runs]


for dt in ["bf16", "fp16", "tf32", "fp32"]:
    g, ours_runs = fastest([f"gemm_{dt}_gpulab", f"gemm_{dt}_gpulab_2"])
    t, ref_runs = fastest([f"gemm_{dt}_torch", f"gemm_{dt}_torch_2"])
    ours = get(g, "average_gflops")
    ref = get(t, "average_gflops")
    row(f"GEMM {dt} 8192", "TFLOPS", ours and ours / 1e3, ref and ref / 1e3, 0.97)
    rows[-1]["runs"] = {"gpulab": ours_runs, "reference": ref_runs}
    if g is not None:
        rows[-1]["max_relative_error"] = g.get("max_relative_error")

g, t = last_json("resnet50_gpulab"), last_json("resnet50_torch")
case = "ResNet-50 224 px b256 bf16 channels-last"
row(case, "images/s", get(g, "images_per_second"), get(t, "images_per_second"), 1.10)
row(case, "peak GPU memory (allocated)", get(g, "peak_device_memory_bytes"),
    get(t, "peak_device_memory_bytes"), 1.0, higher=False, unit="bytes")

g, t = last_json("llama1b_gpulab"), last_json("llama1b_torch")
case = "llama-1b seq 2048 b8 bf16 AdamW"
row(case, "tokens/s", get(g, "tokens_per_second"), get(t, "tokens_per_second"))
row(case, "TFLOPS", get(g, "tflops_per_device"), get(t, "tflops"))
row(case, "MFU", get(g, "mfu"), get(t, "mfu"))
rows[-1]["goal_absolute"] = 0.45
rows[-1]["met"] = get(g, "mfu") >= 0.45 if get(g, "mfu") is not None else None
row(case, "peak GPU memory (allocated)", get(g, "peak_device_memory_bytes"),
    get(t, "peak_device_memory_bytes"), 1.0, higher=False, unit="bytes")
if t is not None:
    rows[-1]["reference_impl"] = t.get("impl")

parity = {}
for model in ["llama_tiny", "resnet18"]:
    p = last_json(f"parity_{model}")
    parity[model] = p
    rows.append({"case": f"parity {model} (cuda fp32 vs cpu fp64)", "metric": "relative error",
                 "gpulab": get(p, "device_fp32", "gradients_relative_error"),
                 "reference": get(p, "cpu_fp32", "gradients_relative_error"),
                 "logits": get(p, "device_fp32", "logits_relative_error"),
                 "met": get(p, "passed")})

a = last_json("allreduce_nccl")
big = a["rows"][-1] if a and a.get("rows") else None
rows.append({"case": "bench allreduce nccl (1 rank)", "metric": "algbw GB/s at the largest size",
             "gpulab": get(big, "algbw_gbs"),
             "met": None if "allreduce_nccl" not in status
             else status["allreduce_nccl"]["exit"] == 0 and get(big, "wrong") == 0})
for name in ["ddp_nccl", "shard_full_nccl"]:
    rows.append({"case": name.replace("_", " "), "metric": "ran",
                 "met": None if name not in status else status[name]["exit"] == 0})
# The tensor-parallel path on one GPU (--tp 1, the mesh's degenerate case): the needs-gpu case
# prints its bench train JSON.
tp = last_json("needs_gpu_tp_mesh")
rows.append({"case": "TP 1 mesh llama-tiny seq128 b4 fp32 (NCCL)", "metric": "tokens/s",
             "gpulab": get(tp, "tokens_per_second"),
             "met": None if "needs_gpu_tp_mesh" not in status
             else status["needs_gpu_tp_mesh"]["exit"] == 0 and get(tp, "tensor_parallel") == 1})

# GRPO on one GPU: the run's epoch line has its generation and training tokens/s.
grpo_path = os.path.join(steps, "grpo_gpu.out")
grpo_rates = re.findall(r"gen (\d+) tok/s, train (\d+) tok/s",
                        open(grpo_path, errors="replace").read()) if os.path.exists(grpo_path) else []
for i, metric in enumerate(["generation tokens/s", "training tokens/s"]):
    rows.append({"case": "GRPO llama-tiny 4 prompts x 8, one GPU", "metric": metric,
                 "gpulab": float(grpo_rates[-1][i]) if grpo_rates else None,
                 "met": None if "grpo_gpu" not in status
                 else status["grpo_gpu"]["exit"] == 0 and bool(grpo_rates)})

hf = os.path.join(steps, "host.json")
host = json.load(open(hf)) if os.path.exists(hf) else {}
detect = last_json("detect")
report = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "host": host,
          "gpulab_version": open(os.path.join(steps, "version.out")).read().strip()
          if os.path.exists(os.path.join(steps, "version.out")) else None,
          "detect": detect, "build_warnings": None, "steps": status, "rows": rows, "parity": parity,
          # llama-1b's heaviest GPU kernels (bench train --profile), for the MFU row's next step.
          "llama1b_profile_top": get(last_json("llama1b_profile"), "profile_top")}
wf = os.path.join(steps, "build.warnings")
if os.path.exists(wf):
    report["build_warnings"] = int(open(wf).read().strip() or 0)
with open(os.path.join(out, "gpu-check.json"), "w") as f:
    json.dump(report, f, indent=2)


def fmt(v, unit=""):
    if v is None:
        return "-"
    if unit == "bytes":
        return f"{v / 2**30:.1f} GiB"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v:.4g}"


print(f"{'case':44} {'metric':30} {'gpulab':>10} {'reference':>10} {'ratio':>7} {'goal':>6} met")
for r in rows:
    goal = r.get("goal") if r.get("goal") is not None else r.get("goal_absolute")
    print(f"{r['case'][:44]:44} {r['metric'][:30]:30} {fmt(r.get('gpulab'), r.get('unit', '')):>10} "
          f"{fmt(r.get('reference'), r.get('unit', '')):>10} {fmt(r.get('ratio')):>7} {fmt(goal):>6} "
          f"{fmt(r.get('met'))}")
if report["llama1b_profile_top"]:
    print("llama-1b, the heaviest of its profiled steps' work:")
    for op in report["llama1b_profile_top"][:10]:
        print(f"  {op['self_ms']:10.1f} ms {op['calls']:6} calls  {op['on']}  {op['name'][:100]}")
failed = [n for n, s in status.items() if s["exit"] not in (0, "skipped")]
print(f"steps: {len(status)} run, {len(failed)} failed{': ' + ', '.join(failed) if failed else ''}")
