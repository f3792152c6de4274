#!/bin/bash
# docs/parallelism.md's "Which layout to use" table: `gpulab plan`'s recommended device-mesh
# layout for Llama shapes of 1B to 405B on H100 (8 or 4 GPUs a node) and MI300X, bf16 autocast,
# 4096-token sequences, one a micro-batch. Usage: scripts/plan-layout-table.sh [GPULAB]
set -euo pipefail
gpulab=${1:-build/gpulab}
here=$(cd "$(dirname "$0")/.." && pwd)

# One cell: "TP t x PP p x DP d, SHARD" (+ ckpt where only activation checkpointing fits).
cell() {
  local out
  out=$("$gpulab" plan --model "$1" --gpus "$2" --gpu "$3" --gpus_per_node "$4" \
    --precision bf16 --seq_len 4096)
  grep -o 'Recommended: TP [0-9]* x PP [0-9]* x DP [0-9]*, --shard [a-z]*\(, --activation_checkpointing\)\?' \
    <<<"$out" | sed 's/Recommended: //; s/, --activation_checkpointing/ + ckpt/; s/--shard //' ||
    echo "nothing fits"
}

echo "| model | GPUs | H100 80 GB, 8 a node | H100 80 GB, 4 a node | MI300X 192 GB, 8 a node |"
echo "|---|---|---|---|---|"
for row in "llama-1b 8" "llama3-8b 8" "llama3-70b 16" "llama3-70b 64" \
  "$here/docs/configs/llama3.1-405b.json 64" "$here/docs/configs/llama3.1-405b.json 128" \
  "$here/docs/configs/llama3.1-405b.json 512"; do
  read -r model gpus <<<"$row"
  echo "| $(basename "$model" .json) | $gpus | $(cell "$model" "$gpus" h100 8) |" \
    "$(cell "$model" "$gpus" h100 4) | $(cell "$model" "$gpus" mi300x 8) |"
done
