#!/usr/bin/env bash
# A model whose DDP training does not fit a per-rank memory cap trains under the same cap with
# --shard full on 4 ranks (issue 15's memory row), through the real CLI, launcher and cgroups:
# each rank runs in its own cgroup with memory.max (v2) or memory.limit_in_bytes (v1)
# (--rank_memory_max). DDP must end with the launcher naming the rank and the cap; ZeRO-3 must
# finish. Also: a malformed cap is refused before any rank starts.
# usage: memory_cap_test.sh /path/to/gpulab
# Exit 0 pass, 1 fail, 77 skipped (with the reason on stdout).
set -uo pipefail

GPULAB=${1:?path to gpulab}
WORK=$(mktemp -d -t gpulab-memcap-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

# Where no cgroup memory controller is writable the launcher says why, before starting anything.
probe=$("$GPULAB" launch --rank_memory_max 64M -- true 2>&1)
code=$?
if [ $code = 3 ] && grep -q "needs a cgroup memory controller" <<<"$probe"; then
  skip "$(grep '^error:' <<<"$probe" | sed 's/^error: //')"
fi
[ $code = 0 ] || { echo "$probe"; fail "the cgroup probe exited with $code"; }

# A deep, narrow Llama (48 blocks of 384, 60.5M parameters): AdamW needs 16 bytes per parameter
# with DDP (weights, gradients, two moments: 0.92 GiB before activations and the process itself)
# and 4 with ZeRO-3 on 4 ranks, plus one gathered model at the end for the export. Measured on
# this machine: ZeRO-3 580-660 MiB per rank, rank 0 (which writes the weights) 680 MiB resident;
# DDP about 1.0 GiB (1.37 GiB for the same shape with 48 blocks). 800M sits in between with
# room on both sides, and the whole test takes about 40 s on 2 cores.
CAP=800M
cat >"$WORK/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "hidden_size": 384, "intermediate_size": 1032,
 "num_hidden_layers": 34, "num_attention_heads": 6, "num_key_value_heads": 6, "vocab_size": 256,
 "max_position_embeddings": 128, "rms_norm_eps": 1e-5}
JSON
JOB=(train --model "$WORK/config.json" --dataset synthetic-text --seq_len 8 --batch_size 4
     --batch_size_scaled --optimizer adamw --learning_rate 1e-3 --device cpu --threads 1
     --nproc_per_node 4 --num_epochs 1 --limit_train_batches 2 --limit_eval_batches 1
     --no_checkpoints --no_report --rank_memory_max $CAP)

# A malformed cap: one clear line, exit 2, no rank started.
# (The job without its own cap: a flag given twice is refused as such before its value is read.)
"$GPULAB" "${JOB[@]:0:${#JOB[@]}-2}" --shard full --rank_memory_max 3X --output_dir "$WORK/bad" \
  >"$WORK/bad.log" 2>&1
code=$?
[ $code = 2 ] || { cat "$WORK/bad.log"; fail "--rank_memory_max 3X exited with $code, not 2"; }
grep -q "is not a memory size" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "no clear message for 3X"; }
! grep -q "starting 4 rank" "$WORK/bad.log" || fail "ranks were started for a malformed cap"
echo "--rank_memory_max 3X refused before any rank started: $(grep '^error:' "$WORK/bad.log")"

t0=$(date +%s.%N)
"$GPULAB" "${JOB[@]}" --shard none --output_dir "$WORK/ddp" >"$WORK/ddp.log" 2>&1
code=$?
t1=$(date +%s.%N)
[ $code != 0 ] || { cat "$WORK/ddp.log"; fail "DDP trained under $CAP: the cap or the model is too large for this test"; }
line=$(grep '^error: ' "$WORK/ddp.log" | tail -1)
grep -Eq "^error: rank [0-3] \(pid [0-9]+\) .*out of memory: the kernel's OOM killer acted at its --rank_memory_max cap of 800 MiB" <<<"$line" \
  || { cat "$WORK/ddp.log"; fail "DDP failed without naming the rank and the cap"; }
printf 'DDP (--shard none), 4 ranks, cap %s: exit %d after %.1f s\n  %s\n' $CAP $code "$(echo "$t1 - $t0" | bc)" "$line"

"$GPULAB" "${JOB[@]}" --shard full --output_dir "$WORK/full" >"$WORK/full.log" 2>&1
code=$?
t2=$(date +%s.%N)
[ $code = 0 ] || { cat "$WORK/full.log"; fail "ZeRO-3 failed under $CAP (exit $code)"; }
grep -q "Training took" "$WORK/full.log" && [ -s "$WORK/full/model.safetensors" ] \
  || { cat "$WORK/full.log"; fail "ZeRO-3 finished without training or writing its weights"; }
printf 'ZeRO-3 (--shard full), 4 ranks, cap %s: exit 0 after %.1f s\n' $CAP "$(echo "$t2 - $t1" | bc)"
grep -E "Memory per rank after step 1|Epoch 1/1|peak memory per rank" "$WORK/full.log" | sed 's/^/  /'
echo "PASS"
