#!/usr/bin/env bash
# The tests that need a GPU (ctest label needs-gpu): detect finds the GPUs the driver lists, the
# GPU's float32 step matches the CPU's float64 one, NCCL all-reduces every element right, the CUDA
# allocator's peaks are reported, the wheel's process exits cleanly after GPU work, the
# tensor-parallel path runs on one GPU (--tp 1), and PyTorch itself on the same GPU agrees
# (reference). Without a GPU each case skips with that reason; `make gpu-check` runs them all on a
# GPU host. NEEDS_GPU_DEVICE=cpu runs tp_mesh on the CPU (Gloo) instead, to check the case itself
# on a machine without a GPU.
# usage: needs_gpu_test.sh CASE GPULAB
#   (CASE: detect parity reference nccl_allreduce allocator exit_path tp_mesh)
set -uo pipefail
CASE=$1 G=$2
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $CASE: $*"; exit 1; }
PY=${PYTHON:-python3}  # the host's Python (a GPU host may have no /usr/bin/python3)

# The driver's own count: nvidia-smi -L (or rocm-smi); none -> skip, the machine's property.
driver_gpus() {
  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L 2>/dev/null | grep -c '^GPU '
  elif command -v rocm-smi >/dev/null 2>&1; then rocm-smi --showid 2>/dev/null | grep -c '^GPU\['
  else echo 0; fi
}
GPUS=$(driver_gpus)
DEV=${NEEDS_GPU_DEVICE:-cuda}
BACKEND=nccl
if [ "$DEV" = cpu ] && [ "$CASE" = tp_mesh ]; then
  BACKEND=gloo GPUS=0
  echo "NEEDS_GPU_DEVICE=cpu: the case on the CPU over Gloo"
elif [ "${GPUS:-0}" -eq 0 ]; then
  echo "SKIPPED: no GPU: this machine's driver lists none (nvidia-smi/rocm-smi); make gpu-check runs it on a GPU host"
  exit 77
fi
echo "driver lists $GPUS GPU(s)"

json_field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

case $CASE in
  detect)
    "$G" detect --json >"$WORK/d.json" || fail "gpulab detect exited $?"
    found=$(json_field "$WORK/d.json" '["gpu_count"]')
    echo "gpulab detect: $found GPU(s)"
    [ "$found" = "$GPUS" ] || fail "detect found $found GPU(s), the driver lists $GPUS"
    ;;
  parity)
    # bench parity's own verdict: float32 on the GPU (TF32 off) against float64 on the CPU, with
    # the CPU's float32 error printed beside it for scale.
    for m in llama-tiny resnet18; do
      "$G" bench parity --json --model "$m" --device cuda:0 >"$WORK/p.json"
      code=$?
      cat "$WORK/p.json"
      [ -s "$WORK/p.json" ] || fail "$m: bench parity exited $code with no report"
      [ "$(json_field "$WORK/p.json" '["passed"]')" = True ] || fail "$m: the GPU's step is off the CPU's"
    done
    ;;
  reference)
    # Independent references on the same GPU (issue 44 item 3): torchvision's ResNet-18 logits and
    # transformers' greedy tokens, PyTorch running the same weights on cuda:0 (the host's Python
    # with torch, torchvision and transformers: $PYTHON, as make gpu-check uses).
    RPY=${PYTHON:-python3}
    "$RPY" -c 'import torch, torchvision, transformers' || fail "$RPY cannot import torch, torchvision and transformers"
    ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
    "$RPY" "$ROOT/bench/reference/device_parity.py" --gpulab "$G" --device cuda:0 ||
      fail "gpulab on the GPU is off PyTorch's own result on the same GPU (the line above)"
    ;;
  nccl_allreduce)
    # One rank per GPU; the bench checks each all-reduced element against the expected sum.
    "$G" bench allreduce --json --backend nccl --nproc_per_node "$GPUS" --min_bytes 1024 \
      --max_bytes $((64 << 20)) --iters 3 >"$WORK/a.json" || fail "bench allreduce exited $?"
    wrong=$("$PY" -c 'import json,sys; print(sum(r["wrong"] for r in json.load(open(sys.argv[1]))["rows"]))' "$WORK/a.json")
    echo "NCCL all-reduce over $GPUS rank(s): $wrong wrong element(s)"
    [ "$wrong" = 0 ] || fail "$wrong element(s) differ from the expected sum"
    ;;
  allocator)
    "$G" train --model llama-tiny --dataset synthetic-text --seq_len 128 --batch_size 4 --device cuda \
      --max_steps 3 --output_dir "$WORK/run" --no_report >"$WORK/log" 2>&1 || { cat "$WORK/log"; fail "train exited"; }
    line=$(grep -o 'peak GPU mem [0-9]* MiB allocated, [0-9]* MiB reserved' "$WORK/log" | tail -1)
    echo "$line"
    [ -n "$line" ] || fail "no 'peak GPU mem' line"
    read -r alloc reserved < <(grep -o '[0-9]\+' <<<"$line" | tr '\n' ' ')
    if [ "$alloc" -le 0 ] || [ "$reserved" -lt "$alloc" ]; then fail "allocated $alloc, reserved $reserved MiB"; fi
    ;;
  exit_path)
    # The wheel once crashed at exit after GPU work (issue 38): a bench run must end with 0.
    "$G" --version | tee "$WORK/v"
    if ! grep -q 'GPUs\? visible' "$WORK/v" || grep -q 'no GPU visible' "$WORK/v"; then fail "--version sees no GPU"; fi
    "$G" bench train --dataset synthetic --model resnet18 --input_size 32 --batch_size 8 --steps 3 \
      --warmup 1 --device cuda:0 >"$WORK/b" 2>&1
    code=$?
    tail -3 "$WORK/b"
    [ "$code" = 0 ] || fail "bench train on the GPU exited $code"
    ;;
  tp_mesh)
    # --tp 1: the tensor-parallel model over a device mesh of one rank (its degenerate case, every
    # TP collective over a group of one), so every GPU check runs the TP code path: llama-tiny on
    # one rank over NCCL, fp32 (the TP layers refuse autocast). The JSON goes to stdout, where
    # make gpu-check's report reads it.
    "$G" bench train --json --model llama-tiny --dataset synthetic-text --seq_len 128 --batch_size 4 \
      --tp 1 --nproc_per_node 1 --backend "$BACKEND" --device "$DEV" --precision fp32 --steps 3 \
      --warmup 1 >"$WORK/t.json" 2>"$WORK/t.err" || { tail -5 "$WORK/t.err"; fail "bench train --tp 1 exited"; }
    cat "$WORK/t.json"
    [ "$(json_field "$WORK/t.json" '.get("tensor_parallel")')" = 1 ] || fail "the run had no device mesh"
    tps=$(json_field "$WORK/t.json" '["tokens_per_second"]')
    echo "tensor parallel 1 on $DEV: $tps tokens/s"
    "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$tps" || fail "no tokens trained"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: $CASE"
