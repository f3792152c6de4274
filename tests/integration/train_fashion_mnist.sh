#!/usr/bin/env bash
# Real data, real accuracy: ResNet-18 on Debian's Fashion-MNIST must reach >= 90% test top-1
# within 3 epochs on a CPU. Prints the run and exits 77 (skip) when the data set is missing.
# lr 0.05 with half an epoch of warm-up: at lr 0.1 / 0.2 epochs the first epoch sometimes blows up
# and 3 epochs ended anywhere from 0.88 to 0.90 with only the rounding of the kernels changed
# (measured: 1-epoch test top-1 0.75-0.89 over seeds 0-2); here four runs over two seeds and two
# convolution paths ended at 0.914-0.917.
set -euo pipefail
G=$1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "[  SKIPPED ] dataset-fashion-mnist is not installed"
  exit 77
fi
"$G" train --model resnet18 --dataset fashion-mnist --input_size 32 --batch_size 128 \
  --optimizer sgd --learning_rate 0.05 --nesterov --weight_decay 5e-4 --lr_schedule cosine \
  --warmup_epochs 0.5 --num_epochs 3 --channels_last --seed 0 --output_dir "$OUT/run" | tee "$OUT/log"
# No fashion-mnist folder here: the run says it read Debian's copy.
grep -q "^Data: /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist package)" "$OUT/log" ||
  { echo "FAIL: the header does not say where the data came from"; exit 1; }
acc=$(grep '^Test accuracy:' "$OUT/log" | tail -1 | awk '{print $3}')
test -s "$OUT/run/report.html" && test -s "$OUT/run/model.safetensors" && test -s "$OUT/run/metrics.jsonl"
echo "final test top-1: $acc"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.90) }' || { echo "FAIL: below 0.90"; exit 1; }
