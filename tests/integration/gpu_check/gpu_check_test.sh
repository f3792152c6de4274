#!/usr/bin/env bash
# make gpu-check without a GPU host: it says what is missing (no GPU, no PyTorch, a CPU-only
# PyTorch) and exits 3 before building anything; and its report reads gpulab's and the
# references' real JSON (CPU runs of the same commands) into one gpu-check.json.
# usage: gpu_check_test.sh GPULAB REFERENCE_PYTHON (the pinned environment's, with the wheel)
set -uo pipefail
G=$1 PY=$2
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect_refusal WANT ENV...: runs gpu-check with ENV, expects exit 3, WANT on stderr, no build.
expect_refusal() {
  local want=$1; shift
  env GPU_CHECK_OUT="$WORK/out" GPU_CHECK_BUILD="$WORK/build" "$@" bash "$ROOT/scripts/gpu-check.sh" \
    >"$WORK/stdout" 2>"$WORK/stderr"
  local code=$?
  echo "== $* -> exit $code: $(head -1 "$WORK/stderr")"
  [ "$code" = 3 ] || { cat "$WORK/stdout" "$WORK/stderr"; fail "exit $code, expected 3"; }
  grep -q "^error: .*$want" "$WORK/stderr" || { cat "$WORK/stderr"; fail "no '$want' error"; }
  grep -q '^hint: ' "$WORK/stderr" || fail "no hint"
  [ ! -e "$WORK/build" ] || fail "a build folder was made before the refusal"
}

if command -v nvidia-smi >/dev/null || command -v rocm-smi >/dev/null || [ -e /dev/nvidia0 ] || [ -e /dev/kfd ]; then
  echo "[  SKIPPED ] this machine has a GPU: run make gpu-check itself"
  exit 77
fi
expect_refusal "this host has no GPU"
# A stand-in nvidia-smi gets past the GPU check, to reach the PyTorch ones.
mkdir -p "$WORK/bin"; printf '#!/bin/sh\nexit 0\n' >"$WORK/bin/nvidia-smi"; chmod +x "$WORK/bin/nvidia-smi"
expect_refusal "has no PyTorch" PATH="$WORK/bin:$PATH" PYTHON=/bin/false
"$PY" -c 'import torch' || fail "the reference interpreter $PY cannot import torch: run make deps"
if [ "$("$PY" -c 'import torch; print(torch.version.cuda or torch.version.hip or "none")')" = none ]; then
  expect_refusal "is a CPU-only build" PATH="$WORK/bin:$PATH" PYTHON="$PY"
else
  expect_refusal "sees no GPU" PATH="$WORK/bin:$PATH" PYTHON="$PY"
fi

# The report over real outputs: CPU runs of the matrix's gemm and parity commands.
S=$WORK/report/steps; mkdir -p "$S"
"$G" gpu-test --json --device cpu --dtype fp32 --size 128 --iterations 3 >"$S/gemm_fp32_gpulab.out" || fail "gpu-test"
"$G" gpu-test --json --device cpu --dtype fp32 --size 128 --iterations 3 >"$S/gemm_fp32_gpulab_2.out" || fail "gpu-test"
"$PY" "$ROOT/bench/reference/matmul.py" --device cpu --dtype fp32 --size 128 --iterations 3 \
  >"$S/gemm_fp32_torch.out" || fail "matmul.py"
"$G" bench parity --json --device cpu --model resnet18 --batch_size 4 >"$S/parity_resnet18.out" || fail "bench parity"
"$G" --version >"$S/version.out"
# The GRPO row's command on the CPU (the bench's model made by the same script), 2 short steps.
"$PY" "$ROOT/bench/reference/grpo_trl_ref.py" --weights "$WORK/grpo" --make || fail "grpo --make"
"$G" train --task grpo --weights "$WORK/grpo" --prompts "$WORK/grpo/prompts.jsonl" --group_size 4 \
  --batch_size 2 --max_new_tokens 8 --temperature 1.0 --reward 'answer+0.2*regex' --reward_regex '^\d' \
  --max_steps 2 --seed 0 --device cpu --no_report --output_dir "$WORK/grpo/run" >"$S/grpo_gpu.out" 2>&1 ||
  { cat "$S/grpo_gpu.out"; fail "the GRPO row's command"; }
"$G" bench train --json --model llama-tiny --dataset synthetic-text --seq_len 32 --batch_size 2 \
  --steps 1 --warmup 1 --profile "$WORK/trace.json" >"$S/llama1b_profile.out" 2>/dev/null || fail "bench train --profile"
printf 'gemm_fp32_gpulab 0 1\ngemm_fp32_torch 0 1\nparity_resnet18 0 2\nllama1b_gpulab 124 180\ngrpo_gpu 0 9\n' >"$S/status"
"$PY" "$ROOT/bench/gpu_check_report.py" "$WORK/report" | tee "$WORK/table" || fail "the report failed"
/usr/bin/python3 - "$WORK/report/gpu-check.json" <<'PY' || fail "gpu-check.json is not what the steps said"
import json, sys
r = json.load(open(sys.argv[1]))
gemm = next(x for x in r["rows"] if x["case"] == "GEMM fp32 8192")
assert gemm["gpulab"] > 0 and gemm["reference"] > 0 and gemm["ratio"] > 0, gemm
# Two gpulab runs (ABBA order on a GPU): the row is the faster, both are listed.
assert len(gemm["runs"]["gpulab"]) == 2 and gemm["gpulab"] == max(gemm["runs"]["gpulab"]), gemm
assert gemm["runs"]["gpulab"][0] != gemm["runs"]["gpulab"][1], "two runs, one figure: nothing chosen"
par = next(x for x in r["rows"] if x["case"].startswith("parity resnet18"))
assert par["met"] is True and 0 < par["gpulab"] < 1e-3, par
assert r["steps"]["llama1b_gpulab"]["exit"] == 124, r["steps"]
assert "libtorch" in r["gpulab_version"], r["gpulab_version"]
grpo = [x for x in r["rows"] if x["case"].startswith("GRPO")]
assert len(grpo) == 2 and all(x["gpulab"] > 0 and x["met"] for x in grpo), grpo
top = r["llama1b_profile_top"]  # the profiled run's heaviest work, heaviest first
assert top and [op["self_ms"] for op in top] == sorted((op["self_ms"] for op in top), reverse=True), top
print("gpu-check.json: gemm ratio %.3f, parity gradients %.2e" % (gemm["ratio"], par["gpulab"]))
PY
grep -q "steps: 5 run, 1 failed: llama1b_gpulab" "$WORK/table" || fail "the table does not count the failed step"
# The faster run is the row whichever of the two it was: the same report with the runs swapped.
mv "$S/gemm_fp32_gpulab.out" "$WORK/first.out"
mv "$S/gemm_fp32_gpulab_2.out" "$S/gemm_fp32_gpulab.out"
mv "$WORK/first.out" "$S/gemm_fp32_gpulab_2.out"
cp "$WORK/report/gpu-check.json" "$WORK/before-swap.json"
"$PY" "$ROOT/bench/gpu_check_report.py" "$WORK/report" >/dev/null || fail "the report failed"
/usr/bin/python3 - "$WORK/before-swap.json" "$WORK/report/gpu-check.json" <<'PY' || fail "the GEMM row depends on the runs' order"
import json, sys
a, b = (next(x for x in json.load(open(f))["rows"] if x["case"] == "GEMM fp32 8192") for f in sys.argv[1:])
assert b["runs"]["gpulab"] == a["runs"]["gpulab"][::-1] and b["gpulab"] == a["gpulab"], (a, b)
PY
echo PASS
