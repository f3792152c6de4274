#!/usr/bin/env bash
# TP 2 x PP 2 checkpoints on the CPU, side by side in one run: llama-125m (fp32, AdamW, 4 ranks
# over Gloo, one step an epoch) with a checkpoint every epoch and without any, and with
# GPULAB_BEFORE=path/to/an/older/gpulab the same two runs of that build as well (an A/B of a
# change). Prints each run's phase line (the "checkpoints" and "final save" seconds), rank 0's
# peak host memory per epoch (metrics.jsonl), the largest rank's peak over the whole run with the
# final model.safetensors written (GNU time's maximum resident set of the launcher's children),
# each rank's peak (its VmHWM, polled every 0.2 s while it runs), and the newest checkpoint's
# files with their bytes. LAYOUT="--tp 2 --shard full" (say) runs another layout of the 4 ranks.
# Usage: bench/mesh_checkpoint.sh [EPOCHS]   (GPULAB=path/to/gpulab to use another build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GPULAB=${GPULAB:-$ROOT/build/gpulab}
EPOCHS=${1:-3}
WORK=$(mktemp -d /tmp/gpulab-mesh-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
common=(train --model llama-125m --dataset synthetic-text --seq_len 32 --batch_size 4
  --num_epochs "$EPOCHS" --limit_train_batches 1 --limit_eval_batches 1 --device cpu
  --precision fp32 --optimizer adamw --threads 1 --backend gloo --nproc_per_node 4 --no_report)
read -r -a layout <<<"${LAYOUT:---tp 2 --pp 2}"
common+=("${layout[@]}")
echo "layout: ${layout[*]}"
builds=("this:$GPULAB")
[ -n "${GPULAB_BEFORE:-}" ] && builds=("before:$GPULAB_BEFORE" "${builds[@]}")

# Each rank's VmHWM (its peak resident set) under run folder $1, sampled until process $2 ends:
# the ranks are the processes whose command line names that folder with a GPULAB rank in their
# environment; written to $1.hwm as "rank R: N" by rank.
poll_ranks() {
  python3 - "$1" "$2" <<'PY'
import os, sys, time
out, job = sys.argv[1], int(sys.argv[2])
peak = {}
def rank_of(pid):
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return None
    if out.encode() not in cmd:
        return None
    for e in env:
        if e.startswith(b"RANK="):
            return int(e[5:])
    return None
while os.path.exists(f"/proc/{job}"):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        r = rank_of(pid)
        if r is None:
            continue
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmHWM:"):
                    peak[r] = max(peak.get(r, 0), int(line.split()[1]) // 1024)
        except OSError:
            pass
    time.sleep(0.2)
open(out + ".hwm", "w").write(", ".join(f"rank {r}: {peak[r]}" for r in sorted(peak)))
PY
}

one_run() {  # build-name binary mode
  local out="$WORK/$1-$3" flags=()
  [ "$3" = none ] && flags=(--no_checkpoints)
  /usr/bin/time -f "%M" -o "$out.rss" "$2" "${common[@]}" "${flags[@]}" --output_dir "$out" \
    >"$out.log" 2>&1 &
  local job=$!
  poll_ranks "$out" "$job" &
  local poller=$!
  wait "$job" || { cat "$out.log"; exit 1; }
  wait "$poller" || true
  echo "== $1 build, checkpoints: $3: $(grep -E '^Training took' "$out.log")"
  grep -E '^Time outside' "$out.log" | tail -1
  echo "largest rank's peak host memory, final save included: $(($(tail -1 "$out.rss") / 1024)) MiB"
  python3 - "$out/metrics.jsonl" <<'PY'
import json, sys
peaks = [r.get("peak_host_memory_bytes", 0) / 2**20 for r in map(json.loads, open(sys.argv[1]))
         if r.get("type") == "epoch"]
print("rank 0 peak host memory by epoch (MiB):", ", ".join(f"{p:.0f}" for p in peaks))
PY
  echo "each rank's peak host memory (VmHWM, MiB): $(cat "$out.hwm")"
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
