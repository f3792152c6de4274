#!/usr/bin/env bash
# The main job of `make demo`: detect the GPUs, train ResNet-18 on the bundled Fashion-MNIST
# (Debian's dataset-fashion-mnist) for a short run with real test accuracy, then a short GEMM
# stress test on the best device. Finishes in a few minutes on a 2-core CPU machine.
set -euo pipefail
BUILD=${1:-build}
G="$BUILD/gpulab"
OUT=${GPULAB_DEMO_OUT:-$BUILD/demo-run}
echo "== gpulab detect"
"$G" detect
echo
echo "== gpulab train (ResNet-18 on Fashion-MNIST, short run)"
rm -rf "$OUT"
"$G" train --model resnet18 --dataset fashion-mnist --input_size 32 --batch_size 128 \
  --optimizer sgd --learning_rate 0.1 --nesterov --weight_decay 5e-4 --lr_schedule cosine \
  --warmup_epochs 0.2 --num_epochs 1 --channels_last --output_dir "$OUT"
echo "(metrics: $OUT/metrics.jsonl, report: $OUT/report.html, weights: $OUT/model.safetensors)"
echo
echo "== gpulab gpu-test (short)"
"$G" gpu-test --size 512 --iterations 50
