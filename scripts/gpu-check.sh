#!/usr/bin/env bash
# `make gpu-check`: every GPU row of gpulab in one command, on a GPU host that has the PyTorch
# wheel and nothing else (no package registry). Builds the trainer against the wheel's libtorch
# with the header-only packages of `make gpu-bundle` (.deps/), then runs a fixed matrix, each
# gpulab row beside its PyTorch reference in the same run: detect; GEMM bf16/fp16/tf32/fp32 at
# 8192 vs torch.matmul; ResNet-50 224 px b256 bf16 channels-last vs bench/reference/train_ref.py;
# llama-1b seq 2048 bf16 AdamW vs bench/reference/llm_gpu_ref.py; GPU-vs-CPU parity (llama-tiny,
# resnet18); one NCCL rank of DDP and of --shard full; bench allreduce on NCCL; then the
# needs-gpu tests (tests/integration/needs_gpu/), tp_mesh among them: --tp 1 on one GPU, so every
# check runs the tensor-parallel path. Every step has a
# timeout and a failed step does not stop the others. Writes gpu-check.json, gpu-check.log and
# each step's raw output to OUT (default out/gpu-check-DATE-HOST); commit them under
# bench/results/. Exit 0 when every step ran, 1 when one failed, 3 before building when this host
# has no GPU or no PyTorch. GPU_CHECK_GPULAB names a gpulab built elsewhere against this host's
# torch version (a GPU host's minutes are dear: docs/gpu.md), used instead of building when it
# starts here and says that version. docs/gpu.md says how to run it.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${GPU_CHECK_OUT:-$ROOT/out/gpu-check-$(date -u +%Y-%m-%d)-$(hostname -s)}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build-gpu}
DEPS=${GPULAB_DEPS_ROOT:-$ROOT/.deps}
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-480}  # seconds for the whole run, the build included
START=$(date +%s)
mkdir -p "$OUT/steps"
# What the run makes and need not keep (the GRPO model, the profile's trace): removed at the end.
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
LOG=$OUT/gpu-check.log
: >"$LOG"
say() { echo "[t+$(($(date +%s) - START))s] $*" | tee -a "$LOG"; }
die3() { echo "error: $1" | tee -a "$LOG" >&2; echo "hint: $2" | tee -a "$LOG" >&2; exit 3; }

# --- Preflight: say what is missing before spending minutes on a build.
if ! command -v nvidia-smi >/dev/null 2>&1 && ! command -v rocm-smi >/dev/null 2>&1 &&
   [ ! -e /dev/nvidia0 ] && [ ! -e /dev/kfd ]; then
  die3 "this host has no GPU (no nvidia-smi, rocm-smi, /dev/nvidia0 or /dev/kfd)" \
       "run make gpu-check on a GPU host; here, make test checks the CPU paths"
fi
if ! TORCH_INFO=$("$PY" -c 'import torch, sys
print(torch.__version__, torch.version.cuda or torch.version.hip or "none", torch.cuda.is_available(),
      torch.utils.cmake_prefix_path)' 2>/dev/null); then
  die3 "this host has no PyTorch for $PY (import torch failed)" \
       "install the PyTorch wheel (pip install torch) or set PYTHON to the interpreter that has it"
fi
read -r TORCH_VERSION TORCH_GPU TORCH_SEES_GPU TORCH_PREFIX <<<"$TORCH_INFO"
[ "$TORCH_GPU" != none ] || die3 "PyTorch $TORCH_VERSION is a CPU-only build" \
  "install a CUDA or ROCm wheel of PyTorch"
[ "$TORCH_SEES_GPU" = True ] || die3 "PyTorch $TORCH_VERSION ($TORCH_GPU) sees no GPU" \
  "check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES"
[ -f "$DEPS/usr/include/nlohmann/json.hpp" ] && [ -f "$DEPS/usr/include/CLI/CLI.hpp" ] ||
  die3 "the header-only packages are not in $DEPS" \
       "run make gpu-bundle on a Debian machine and copy the bundle here (docs/gpu.md)"

left() { echo $((BUDGET - ($(date +%s) - START))); }
# step NAME SECONDS CMD...: runs CMD with a timeout (never past the budget), its stdout in
# steps/NAME.out and stderr in steps/NAME.err; records NAME rc seconds in steps/status.
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  local budget; budget=$(left)
  [ "$budget" -lt "$limit" ] && limit=$budget
  if [ "$limit" -le 5 ]; then
    say "$name: skipped, the run's budget is spent"
    echo "$name skipped 0" >>"$OUT/steps/status"
    return 0
  fi
  say "$name ($limit s at most)"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$OUT/steps/$name.out" 2>"$OUT/steps/$name.err"
  rc=$?
  echo "$name $rc $(($(date +%s) - t0))" >>"$OUT/steps/status"
  [ "$rc" = 0 ] || { say "$name: exit $rc"; tail -n 5 "$OUT/steps/$name.err" | sed 's/^/    /' | tee -a "$LOG"; }
  return 0
}

# --- The host, as the log should record it.
say "host: $(hostname) $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-}")"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>/dev/null | tee -a "$LOG"
say "torch $TORCH_VERSION ($TORCH_GPU), cmake prefix $TORCH_PREFIX; $(nproc) cores; $(g++ --version | head -1)"
echo "{\"torch\": \"$TORCH_VERSION\", \"gpu_runtime\": \"$TORCH_GPU\", \"cores\": $(nproc), \"git\": \"${GPU_CHECK_GIT:-$(git rev-parse --short HEAD 2>/dev/null || echo none)}\"}" >"$OUT/steps/host.json"

# --- A gpulab built elsewhere against this torch version: it finds this host's libtorch and the
# CUDA libraries of its wheels through LD_LIBRARY_PATH (its own RUNPATH names the build machine's).
G=
if [ -n "${GPU_CHECK_GPULAB:-}" ]; then
  TORCH_LIB=$(dirname "$(dirname "$TORCH_PREFIX")")/lib
  NV_LIBS=$(ls -d "$TORCH_LIB"/../../nvidia/*/lib 2>/dev/null | tr '\n' ':')
  export LD_LIBRARY_PATH="$TORCH_LIB:$NV_LIBS${LD_LIBRARY_PATH:-}"
  step prebuilt 30 "$GPU_CHECK_GPULAB" --version
  if grep -q "libtorch ${TORCH_VERSION%%+*}[ ,)]" "$OUT/steps/prebuilt.out"; then
    G=$GPU_CHECK_GPULAB
    say "using $G (built elsewhere against torch ${TORCH_VERSION%%+*}): no build here"
  else
    say "$GPU_CHECK_GPULAB does not run on torch $TORCH_VERSION here ($(head -1 "$OUT/steps/prebuilt.out")): building"
  fi
fi

# --- Build: the trainer only, against the wheel's libtorch (the README's GPU-host recipe).
if [ -z "$G" ]; then
  GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
  . "$ROOT/scripts/gpu-host-flags.sh" && gpu_host_cmake_flags "$TORCH_PREFIX" "$DEPS"
  step configure 120 cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" "${GPU_HOST_FLAGS[@]}"
  step build 300 cmake --build "$BUILD" -j "$(nproc)" --target gpulab
  G=$BUILD/gpulab
  grep -c 'warning:' "$OUT/steps/build.out" >"$OUT/steps/build.warnings" 2>/dev/null
fi
if [ ! -x "$G" ]; then
  say "no gpulab binary: the build failed (steps/build.out); the reference rows run alone"
  G=false
fi
step version 10 "$G" --version

# --- The matrix. Each gpulab row, then its reference.
step detect 30 "$G" detect --json
# gpulab, torch, torch, gpulab: a drift of the GPU's clocks over the four runs (the first GEMM of
# 2026-12-04 came just after the GPU idled) favours neither side; each side's faster run is its row.
for dt in bf16 fp16 tf32 fp32; do
  GEMM=(--device cuda:0 --dtype "$dt" --size 8192 --iterations 50)
  step "gemm_${dt}_gpulab" 60 "$G" gpu-test --json "${GEMM[@]}"
  step "gemm_${dt}_torch" 60 "$PY" bench/reference/matmul.py "${GEMM[@]}"
  step "gemm_${dt}_torch_2" 60 "$PY" bench/reference/matmul.py "${GEMM[@]}"
  step "gemm_${dt}_gpulab_2" 60 "$G" gpu-test --json "${GEMM[@]}"
done
R50=(--model resnet50 --input_size 224 --batch_size 256 --precision bf16 --channels_last --steps 20 --warmup 5)
step resnet50_gpulab 150 "$G" bench train --json --dataset synthetic --device cuda:0 "${R50[@]}"
step resnet50_torch 150 "$PY" bench/reference/train_ref.py --device cuda:0 --num_workers 8 "${R50[@]}"
LLAMA=(--model llama-1b --seq_len 2048 --batch_size 8)
# gpulab's side of the reference's step: AdamW at 3e-4, weight decay 0.1, clipping at 1.0.
LLAMA_GPULAB=("$G" bench train --json --dataset synthetic-text --precision bf16 --optimizer adamw
              --learning_rate 3e-4 --weight_decay 0.1 --clip_grad 1.0 --device cuda:0 "${LLAMA[@]}")
step llama1b_gpulab 180 "${LLAMA_GPULAB[@]}" --steps 10 --warmup 3
step llama1b_torch 180 "$PY" bench/reference/llm_gpu_ref.py "${LLAMA[@]}" --steps 10 --warmup 3
step parity_llama_tiny 90 "$G" bench parity --json --model llama-tiny --device cuda:0
step parity_resnet18 90 "$G" bench parity --json --model resnet18 --device cuda:0
step ddp_nccl 120 "$G" train --model resnet18 --dataset synthetic --input_size 32 --batch_size 64 \
  --nproc_per_node 1 --backend nccl --device cuda --max_steps 5 --output_dir "$OUT/runs/ddp" --no_report
step shard_full_nccl 120 "$G" train --model llama-tiny --dataset synthetic-text --seq_len 128 --batch_size 4 \
  --nproc_per_node 1 --backend nccl --device cuda --shard full --optimizer adamw --max_steps 5 \
  --output_dir "$OUT/runs/shard" --no_report
step allreduce_nccl 60 "$G" bench allreduce --json --backend nccl --min_bytes 1048576 --max_bytes 268435456

# --- The needs-gpu tests (ctest label needs-gpu; they skip on a machine without a GPU).
for case in detect exit_path allocator nccl_allreduce parity reference tp_mesh; do
  step "needs_gpu_$case" 120 bash tests/integration/needs_gpu/needs_gpu_test.sh "$case" "$G"
done

# --- GRPO on the GPU, generation and training in one process (issue 42): the bench's tiny llama,
# its byte-level BPE tokenizer and sum prompts (made with transformers and tokenizers), 5 steps.
GRPO_DIR=$SCRATCH/grpo
step grpo_make 90 "$PY" bench/reference/grpo_trl_ref.py --weights "$GRPO_DIR" --make
step grpo_gpu 120 "$G" train --task grpo --weights "$GRPO_DIR" --prompts "$GRPO_DIR/prompts.jsonl" \
  --group_size 8 --batch_size 4 --max_new_tokens 32 --temperature 1.0 --reward 'answer+0.2*regex' \
  --reward_regex '^\d' --max_steps 5 --seed 0 --device cuda --no_report --output_dir "$GRPO_DIR/run"

# --- Where llama-1b's step time goes: its GPU kernels by time (libtorch's Kineto profiler), last
# so that it never takes a goal row's time. The trace stays on the host; the table is the step's.
step llama1b_profile 120 "${LLAMA_GPULAB[@]}" --steps 2 --warmup 2 --profile "$SCRATCH/llama1b-trace.json"

# --- One JSON and a table in the log.
"$PY" bench/gpu_check_report.py "$OUT" | tee -a "$LOG"
say "done: $OUT (gpu-check.json, gpu-check.log, steps/)"
awk '$2 != 0 && $2 != "skipped" {bad = 1} END {exit bad}' "$OUT/steps/status"
