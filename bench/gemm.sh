#!/usr/bin/env bash
# GEMM side by side: `gpulab gpu-test` against torch.matmul, same size/dtype/device, alternating
# runs; prints each side's median GFLOPS and the ratio (gpulab / torch). Usage:
#   bench/gemm.sh [BUILD] [--device cpu] [--size 512] [--iterations 50] [--dtypes "fp32 bf16"] [--reps 5]
set -euo pipefail
BUILD=${1:-build}; shift || true
DEVICE=cpu SIZE=512 ITERS=50 DTYPES="fp32 bf16" REPS=5 JSON_OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;; --size) SIZE=$2; shift 2 ;; --iterations) ITERS=$2; shift 2 ;;
    --dtypes) DTYPES=$2; shift 2 ;; --reps) REPS=$2; shift 2 ;; --json) JSON_OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
rows=()
printf "%-6s %-6s %6s %14s %14s %7s\n" device dtype size gpulab_GFLOPS torch_GFLOPS ratio
for dt in $DTYPES; do
  g=(); t=()
  for ((r = 0; r < REPS; r++)); do
    g+=("$("$BUILD/gpulab" gpu-test --json --device "$DEVICE" --dtype "$dt" --size "$SIZE" --iterations "$ITERS" \
          | $PY -c 'import json,sys; print(json.load(sys.stdin)["average_gflops"])')")
    t+=("$($PY "$HERE/reference/matmul.py" --device "$DEVICE" --dtype "$dt" --size "$SIZE" --iterations "$ITERS" \
          | $PY -c 'import json,sys; print(json.load(sys.stdin)["average_gflops"])')")
  done
  gm=$(printf "%s\n" "${g[@]}" | median); tm=$(printf "%s\n" "${t[@]}" | median)
  ratio=$(awk -v a="$gm" -v b="$tm" 'BEGIN {printf "%.3f", a / b}')
  printf "%-6s %-6s %6s %14.2f %14.2f %7s\n" "$DEVICE" "$dt" "$SIZE" "$gm" "$tm" "$ratio"
  rows+=("{\"device\":\"$DEVICE\",\"dtype\":\"$dt\",\"size\":$SIZE,\"iterations\":$ITERS,\"reps\":$REPS,\"gpulab_gflops_median\":$gm,\"torch_gflops_median\":$tm,\"ratio\":$ratio}")
done
if [ -n "$JSON_OUT" ]; then
  (IFS=,; echo "[${rows[*]}]") > "$JSON_OUT"
fi
