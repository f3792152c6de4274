#!/usr/bin/python3
# gpulab's side of the `grpo` case of bench/compare: `gpulab train --task grpo` on the folder
# bench/reference/grpo_trl_ref.py --make wrote (model, tokenizer.json, prompts.jsonl), with the
# reference's group size, prompts a step, lengths, sampling and rewards, then one JSON line from
# the run's metrics.jsonl: the median step_seconds after the warm-up, the mean completion length
# and completion tokens per second of a step (the figures the reference prints).
import argparse, json, os, shlex, shutil, statistics, subprocess, sys, tempfile

p = argparse.ArgumentParser()
p.add_argument("--gpulab", required=True, help="the gpulab binary")
p.add_argument("--weights", required=True)
p.add_argument("--prompts_per_step", type=int, default=4)
p.add_argument("--group", type=int, default=8)
p.add_argument("--new_tokens", type=int, default=32)
p.add_argument("--steps", type=int, default=5, help="timed steps")
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--extra", default="", help="more flags for gpulab train, one string")
a = p.parse_args()

run_dir = tempfile.mkdtemp(prefix="gpulab-bench-grpo-")
try:
    cmd = [a.gpulab, "train", "--task", "grpo", "--weights", a.weights,
           "--prompts", os.path.join(a.weights, "prompts.jsonl"), "--group_size", str(a.group),
           "--batch_size", str(a.prompts_per_step), "--max_new_tokens", str(a.new_tokens),
           "--temperature", "1.0", "--reward", "answer+0.2*regex", "--reward_regex", r"^\d",
           "--max_steps", str(a.warmup + a.steps), "--seed", "0", "--device", "cpu",
           "--no_report", "--output_dir", run_dir, *shlex.split(a.extra)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(done.stdout + done.stderr)  # the run's own lines, for the bench's raw log
    if done.returncode != 0:
        sys.exit(done.returncode)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [r for r in map(json.loads, f) if "step_seconds" in r][a.warmup:]
    if not steps:
        sys.exit("grpo_gpulab: the run wrote no timed step records")
    sec = statistics.median(r["step_seconds"] for r in steps)
    length = statistics.mean(r["completion_length"] for r in steps)
    print(json.dumps({"seconds_per_step": sec, "completion_length": length,
                      "tokens_per_second": a.group * a.prompts_per_step * length / sec}))
finally:
    shutil.rmtree(run_dir, ignore_errors=True)
