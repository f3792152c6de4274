#!/usr/bin/env bash
# TP 2 x PP 2 checkpoints on the CPU, side by side in one run: llama-125m (fp32, AdamW, 4 ranks
# over Gloo, one step an epoch) with a checkpoint every epoch and without any, and with
# GPULAB_BEFORE=path/to/an/older/gpulab the same two runs of that build as well (an A/B of a
# change). Prints each run's phase line (the "checkpoints" and "final save" seconds), rank 0's
# peak host memory per epoch (metrics.jsonl), the largest rank's peak over the whole run with the
# final model.safetensors written (GNU time's maximum resident set of the launcher's children),
# and the newest checkpoint's files with their bytes.
# Usage: bench/mesh_checkpoint.sh [EPOCHS]   (GPULAB=path/to/gpulab to use another build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GPULAB=${GPULAB:-$ROOT/build/gpulab}
EPOCHS=${1:-3}
WORK=$(mktemp -d /tmp/gpulab-mesh-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
common=(train --model llama-125m --dataset synthetic-text --seq_len 32 --batch_size 4
  --num_epochs "$EPOCHS" --limit_train_batches 1 --limit_eval_batches 1 --device cpu
  --precision fp32 --optimizer adamw --threads 1 --backend gloo --tp 2 --pp 2
  --nproc_per_node 4 --no_report)
builds=("this:$GPULAB")
[ -n "${GPULAB_BEFORE:-}" ] && builds=("before:$GPULAB_BEFORE" "${builds[@]}")

one_run() {  # build-name binary mode
  local out="$WORK/$1-$3" flags=()
  [ "$3" = none ] && flags=(--no_checkpoints)
  /usr/bin/time -f "%M" -o "$out.rss" "$2" "${common[@]}" "${flags[@]}" --output_dir "$out" \
    >"$out.log" 2>&1 || { cat "$out.log"; exit 1; }
  echo "== $1 build, checkpoints: $3: $(grep -E '^Training took' "$out.log")"
  grep -E '^Time outside' "$out.log" | tail -1
  echo "largest rank's peak host memory, final save included: $(($(tail -1 "$out.rss") / 1024)) MiB"
  python3 - "$out/metrics.jsonl" <<'PY'
import json, sys
peaks = [r.get("peak_host_memory_bytes", 0) / 2**20 for r in map(json.loads, open(sys.argv[1]))
         if r.get("type") == "epoch"]
print("rank 0 peak host memory by epoch (MiB):", ", ".join(f"{p:.0f}" for p in peaks))
PY
  if [ "$3" = every ]; then
    local newest
    newest=$(ls "$out/checkpoints"/*.json | sort | tail -1)
    echo "   newest checkpoint $(basename "$newest"):"
    ls -l "${newest%.json}".* | grep -v '\.json$' | awk '{printf "     %s %d bytes\n", $NF, $5}' |
      sed "s|$out/checkpoints/||"
  fi
}

for mode in every none; do
  for b in "${builds[@]}"; do one_run "${b%%:*}" "${b#*:}" "$mode"; done
done
