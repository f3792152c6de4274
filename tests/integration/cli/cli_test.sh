#!/usr/bin/env bash
# CLI conventions a script relies on, through the real binary: every --json prints exactly one JSON
# document on stdout (human text on stderr), and a usage error has the error:/hint: shape of every
# other error. Usage: cli_test.sh CASE GPULAB
set -uo pipefail
CASE=$1
G=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Runs a ResNet training command in the background (output in $WORK/log), sends it signal SIG
# SECONDS after its first training line, and sets code to its exit status.
signal_run() {
  local seconds=$1 sig=$2 pid
  shift 2
  "$@" >"$WORK/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do grep -q '^Training resnet18' "$WORK/log" && break; sleep 0.1; done
  sleep "$seconds"
  kill -"$sig" $pid
  wait $pid
  code=$?
}

# Each --json command with small settings; the test fails when a command gains --json unlisted.
json_cases() {
  echo "detect --json"
  echo "detect --json --no-host"
  echo "gpu-test --json --size 64 --iterations 3"
  echo "models --json"
  echo "bench allreduce --json --min_bytes 1024 --max_bytes 4096 --iters 2 --warmup 1"
  echo "bench allreduce --json --min_bytes 1024 --max_bytes 4096 --iters 2 --warmup 1 --nproc_per_node 2"
  echo "bench train --json --model resnet18 --dataset synthetic --batch_size 4 --steps 1 --warmup 0"
  echo "bench train --json --model resnet18 --dataset synthetic --batch_size 4 --steps 1 --warmup 0 --nproc_per_node 2"
  echo "bench parity --json --model resnet18 --device cpu --batch_size 4"
  echo "bench generate --json --weights lm --new_tokens 4 --reps 1 --warmup 0"
}

# A command path's --help (its words; none for gpulab's own), asked once a run and kept: every
# gpulab process loads libtorch (about 1 s here), and the cases look at each help twice.
mkdir -p "$WORK/help"
help_of() {
  local key="${*:-gpulab}"
  key="$WORK/help/${key// /_}"
  [ -f "$key" ] || "$G" "$@" --help >"$key" 2>/dev/null || { rm -f "$key"; return 1; }
  cat "$key"
}

# Every command path whose --help offers --json.
commands_with_json() {
  local top sub
  for top in $(help_of | awk 'tolower($0) ~ /^subcommands:/{on=1;next} on && NF{print $1}'); do
    if help_of "$top" | grep -q -- '--json'; then echo "$top"; fi
    for sub in $(help_of "$top" | awk 'tolower($0) ~ /^subcommands:/{on=1;next} on && NF{print $1}'); do
      if help_of "$top" "$sub" | grep -q -- '--json'; then echo "$top $sub"; fi
    done
  done
}

case "$CASE" in
json)
  listed=$(json_cases)
  found=$(commands_with_json)
  [ -n "$found" ] || fail "no command offers --json (help format changed?)"
  # bench generate reads a model folder: a one-step llama-tiny run (under a second).
  "$G" train --model llama-tiny --dataset synthetic-text --seq_len 32 --batch_size 2 \
    --num_epochs 1 --limit_train_batches 1 --no_report --output_dir "$WORK/lm" >"$WORK/err" 2>&1 ||
    { cat "$WORK/err"; fail "the llama-tiny run for bench generate failed"; }
  while read -r cmd; do
    echo "$listed" | grep -q "^$cmd --json" || fail "'gpulab $cmd' has --json but no case here"
  done <<<"$found"
  while read -r args; do
    # shellcheck disable=SC2086
    (cd "$WORK" && timeout 300 "$G" $args >"$WORK/out" 2>"$WORK/err")
    code=$?
    docs=$(python3 -c 'import json,sys
t=sys.stdin.read(); d=json.JSONDecoder(); i=n=0
while True:
    while i<len(t) and t[i].isspace(): i+=1
    if i==len(t): break
    _, i = d.raw_decode(t, i); n+=1
print(n)' <"$WORK/out" 2>/dev/null)
    echo "== gpulab $args -> exit $code, $(wc -c <"$WORK/out") bytes, ${docs:-?} document(s)"
    [ "$code" = 0 ] || { cat "$WORK/err"; fail "gpulab $args: exit $code"; }
    python3 -m json.tool <"$WORK/out" >/dev/null || { cat "$WORK/out"; fail "gpulab $args: stdout is not one JSON document"; }
    [ "$docs" = 1 ] || { cat "$WORK/out"; fail "gpulab $args: $docs documents on stdout"; }
  done <<<"$listed"
  # --profile: the trace written where asked, its heaviest ops in the JSON, heaviest first.
  (cd "$WORK" && "$G" bench generate --json --weights lm --new_tokens 4 --reps 1 --warmup 0 \
    --profile gen-trace.json >"$WORK/out" 2>"$WORK/err") || { cat "$WORK/err"; fail "bench generate --profile failed"; }
  python3 - "$WORK/out" "$WORK/gen-trace.json" <<'PY' || fail "bench generate --profile: no trace or no ops"
import json, sys
d = json.load(open(sys.argv[1]))
top = d["profile_top"]
assert d["profile_file"] == "gen-trace.json" and top, d
ms = [op["self_ms"] for op in top]
assert ms == sorted(ms, reverse=True) and all(op["calls"] > 0 for op in top), top
trace = json.load(open(sys.argv[2]))  # Kineto's Chrome trace: its events, each op categorised
assert any(e.get("ph") == "X" and e.get("cat") == "cpu_op" for e in trace["traceEvents"]), "no op"
assert all(op["on"] == "cpu" for op in top), top
print("== bench generate --profile:", ", ".join(op["name"] for op in top[:3]))
PY
  # --clip_grad is the run's clipping (make gpu-check's llama-1b row clips as its reference does).
  "$G" bench train --json --model llama-tiny --dataset synthetic-text --seq_len 32 --batch_size 2 \
    --steps 1 --warmup 0 --clip_grad 0.5 >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "bench train --clip_grad failed"; }
  grep -q 'clip_grad=0.5$' "$WORK/err" || { cat "$WORK/err"; fail "bench train --clip_grad 0.5 is not the run's clipping"; }
  ;;
usage)
  # An unknown flag, a bad value and a missing subcommand: exit 2, error: then hint: on stderr.
  check_usage() {
    "$G" "$@" >"$WORK/out" 2>"$WORK/err"
    local code=$?
    echo "== gpulab $* -> exit $code: $(head -2 "$WORK/err" | tr '\n' '|')"
    [ "$code" = 2 ] || fail "gpulab $*: exit $code, expected 2"
    [ ! -s "$WORK/out" ] || { cat "$WORK/out"; fail "gpulab $*: wrote to stdout"; }
    head -1 "$WORK/err" | grep -q '^error: ' || fail "gpulab $*: first line is not 'error: ...'"
    sed -n 2p "$WORK/err" | grep -q '^hint: .*--help' || fail "gpulab $*: second line is not 'hint: ... --help'"
    [ "$(wc -l <"$WORK/err")" = 2 ] || { cat "$WORK/err"; fail "gpulab $*: more than two lines"; }
  }
  check_usage train --no_such_flag 3
  grep -q 'gpulab train --help' "$WORK/err" || fail "the hint does not name 'gpulab train --help'"
  check_usage train --epochs 3
  grep -q 'did you mean --num_epochs?' "$WORK/err" || fail "no 'did you mean --num_epochs?' for --epochs"
  check_usage bench train --steps 0
  grep -q 'gpulab bench train --help' "$WORK/err" || fail "the hint does not name 'gpulab bench train --help'"
  check_usage --no_such_flag
  check_usage
  # A profile that could not be written is refused before the timed runs, not after them.
  check_usage bench generate --weights "$WORK" --profile /nonexistent-folder/trace.json
  grep -q 'cannot write the profile' "$WORK/err" || fail "no 'cannot write the profile' for --profile"
  ;;
spelling)
  # One flag style: every kebab-case long flag (the service's old spelling) has a snake_case twin.
  paths=$( { echo ""; help_of | awk 'tolower($0) ~ /^subcommands:/{on=1;next} on && NF{print $1}' | while read -r top; do
    echo "$top"
    help_of "$top" | awk -v t="$top" 'tolower($0) ~ /^subcommands:/{on=1;next} on && NF{print t" "$1}'
  done; } )
  checked=0
  while read -r path; do
    # shellcheck disable=SC2086
    help=$(help_of $path) || fail "gpulab $path --help failed"
    for flag in $(grep -oE -- '--[a-z0-9]+(-[a-z0-9]+)+' <<<"$help" | sort -u); do
      checked=$((checked + 1))
      grep -qE -- "(^|[ ,])${flag//-/_}([ ,=]|$)" <<<"${help//--/__}" ||
        fail "gpulab $path: $flag has no snake_case spelling ${flag//-/_}"
    done
  done <<<"$paths"
  echo "$checked kebab-case flags, each with its snake_case twin"
  [ "$checked" -gt 0 ] || fail "no kebab-case flag found (help format changed?)"
  # Both spellings work.
  "$G" detect --json --no_host >/dev/null 2>&1 || fail "detect --no_host"
  "$G" detect --json --no-host >/dev/null 2>&1 || fail "detect --no-host"
  ;;
flag_tables)
  # train, bench train, plan, launch, ddp and slurm submit declare a flag they share one way.
  python3 "$(dirname "$0")/flag_tables.py" "$G" || fail "a flag is declared more than one way"
  ;;
interrupt)
  # Ctrl-C stops at a step boundary, says where and how to resume, and leaves a checkpoint that
  # --resume auto continues from (inside the epoch it stopped in). --subset N prints N.
  RUN="$G train --model resnet18 --dataset synthetic --input_size 32 --batch_size 16 --subset 512
       --num_epochs 30 --seed 1 --output_dir $WORK/run"
  # shellcheck disable=SC2086
  signal_run 5 INT $RUN
  cat "$WORK/log"
  bash "$(dirname "$0")/../../../scripts/symbolize.sh" "$WORK/log" "$G"
  [ "$code" = 130 ] || fail "exit $code after SIGINT, expected 130"
  grep -q '512 train / 512 test images with --subset 512, of 1024 / 1024' "$WORK/log" ||
    fail "the header does not give the subset's size"
  line=$(grep '^Stopped by SIGINT (Ctrl-C) at epoch [0-9]* batch [0-9]* of 32 (step [0-9]*)' "$WORK/log") ||
    fail "no 'Stopped by SIGINT at epoch E batch B of 32 (step S)' line"
  grep -q "to resume, run the same command with --resume auto" "$WORK/log" || fail "no resume hint"
  ls "$WORK/run/checkpoints/"*.pt >/dev/null || fail "no checkpoint left"
  epoch=$(sed 's/.*at epoch \([0-9]*\) batch.*/\1/' <<<"$line")
  batch=$(sed 's/.*batch \([0-9]*\) of.*/\1/' <<<"$line")
  step=$(sed 's/.*(step \([0-9]*\)).*/\1/' <<<"$line")
  # shellcheck disable=SC2086
  $RUN --resume auto --max_steps $((step + 2)) >"$WORK/log2" 2>&1 || { cat "$WORK/log2"; fail "resume failed"; }
  cat "$WORK/log2"
  want="(epoch $((epoch - 1)), step $step"
  [ "$batch" -gt 0 ] && want="$want, batch $batch of epoch $epoch)"
  grep -qF "$want" "$WORK/log2" || fail "the resumed run does not start at '$want'"
  grep -q "Stopped after --max_steps $((step + 2))" "$WORK/log2" || fail "the resumed run did not train on"
  grep -q '^error:' "$WORK/log" && fail "a clean Ctrl-C stop printed an error line"
  # Two ranks: the launcher passes SIGINT on, the ranks stop with a checkpoint, and nothing
  # calls the stop an error.
  # Mid-epoch (32 steps of a rank take about 10 s here). --stop_grace 30: a first step on a
  # loaded machine (make test runs two tests at once) can outlast the default 3 s, and the
  # launcher would then kill the ranks before they stop (it says so).
  # shellcheck disable=SC2086
  signal_run 3 INT $G train --model resnet18 --dataset synthetic --input_size 32 --batch_size 16 \
    --subset 1024 --num_epochs 30 --seed 1 --nproc_per_node 2 --stop_grace 30 \
    --output_dir "$WORK/run2"
  cat "$WORK/log"
  [ "$code" = 130 ] || fail "2 ranks: exit $code after SIGINT, expected 130"
  grep -q 'killed (SIGKILL)' "$WORK/log" && fail "2 ranks: the launcher killed a rank after its grace"
  grep -q 'Stopped by SIGINT' "$WORK/log" || fail "2 ranks: no 'Stopped by SIGINT' line"
  grep -q 'error:' "$WORK/log" && fail "2 ranks: a clean Ctrl-C stop printed an error line"
  ls "$WORK/run2/checkpoints/"*.pt >/dev/null || fail "2 ranks: no checkpoint left"
  ;;
crash_report)
  # A fatal signal prints the stack before the process ends with it (exit 128 + signal), and
  # scripts/symbolize.sh turns its gpulab frames into functions and lines.
  signal_run 2 SEGV "$G" train --model resnet18 --dataset synthetic --input_size 32 \
    --batch_size 16 --subset 512 --num_epochs 30 --no_checkpoints --output_dir "$WORK/run"
  [ "$code" = 139 ] || { cat "$WORK/log"; fail "exit $code after SIGSEGV, expected 139"; }
  grep -q '^gpulab: fatal signal SEGV$' "$WORK/log" || { cat "$WORK/log"; fail "no crash report"; }
  frames=$(bash "$(dirname "$0")/../../../scripts/symbolize.sh" "$WORK/log" "$G")
  echo "$frames"
  # The handler's own frame always comes back with its file and line. Where the trainer was when
  # the signal came is left unchecked: inside oneDNN's generated code (no unwind tables) the
  # stack ends there (seen: 1 run in 6 ended at a bare [0x...] frame after the handler).
  grep -qE 'gpulab::.*on_fatal\(int, .*\) at .*/src/core/crash_report\.cpp:[0-9]' <<<"$frames" ||
    { cat "$WORK/log"; fail "the symbolized stack does not name the handler with its source line"; }
  ;;
long_run)
  # A CPU run whose settings imply hours says so after its first steps (the issue's example:
  # ResNet-18 at 224 px on 28-px Fashion-MNIST), with the flag that changes it.
  if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "[  SKIPPED ] dataset-fashion-mnist is not installed"
    exit 77
  fi
  "$G" train --model resnet18 --dataset fashion-mnist --input_size 224 --batch_size 16 --num_epochs 3 \
    --output_dir "$WORK/run" >"$WORK/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 1800); do grep -q '^Note:' "$WORK/log" && break; sleep 0.1; done
  kill -TERM $pid
  wait $pid
  cat "$WORK/log"
  grep -qE '^Note: at [0-9.]+ s per batch on the CPU, the [0-9]+ batches left take about [0-9]+h[0-9]+m; --input_size 32 \(now 224; the images are stored at 28x28\)' "$WORK/log" ||
    fail "no estimate with the --input_size hint"
  ;;
data_error)
  # Bad data with two ranks: one error and one hint, no per-rank copies, no launcher failure lines.
  "$G" train --model resnet18 --dataset cifar10 --data_dir "$WORK/none" --nproc_per_node 2 \
    --output_dir "$WORK/run" >"$WORK/out" 2>"$WORK/err"
  code=$?
  cat "$WORK/out" "$WORK/err"
  [ "$code" = 2 ] || fail "exit $code, expected 2"
  [ "$(grep -c '^error:' "$WORK/err")" = 1 ] || fail "expected exactly one error: line"
  [ "$(grep -c '^hint:' "$WORK/err")" = 1 ] || fail "expected exactly one hint: line"
  grep -q 'exited with code\|stopping the other ranks\|all ranks stopped' "$WORK/err" &&
    fail "launcher failure lines for a data error"
  ;;
no_cuda)
  # A build against a CPU-only libtorch asked for a GPU: one error, exit 3, before any work.
  "$G" --version | grep -q 'CPU only' || { echo "[  SKIPPED ] this build has CUDA: $("$G" --version)"; exit 77; }
  for cmd in "train --model resnet18 --dataset synthetic --input_size 32 --batch_size 4 --device cuda" \
             "gpu-test --device cuda:0 --size 64 --iterations 1" \
             "bench train --model resnet18 --dataset synthetic --batch_size 4 --steps 1 --device cuda" \
             "bench parity --model llama-tiny --device cuda"; do
    # shellcheck disable=SC2086
    "$G" $cmd >"$WORK/out" 2>"$WORK/err"
    code=$?
    echo "== gpulab $cmd -> exit $code: $(head -2 "$WORK/err" | tr '\n' '|')"
    [ "$code" = 3 ] || fail "gpulab $cmd: exit $code, expected 3"
    grep -q "^error: this build's libtorch has no CUDA: " "$WORK/err" || fail "gpulab $cmd: not the no-CUDA error"
    [ "$(grep -c '^error:' "$WORK/err")" = 1 ] || fail "gpulab $cmd: more than one error line"
  done
  ;;
two_binaries)
  # gpulab links no libtorch and runs its own commands (serve, launch, image, detect) without it;
  # every other command line runs in gpulab-torch beside it (apps/gpulab/dispatch.h).
  readelf -d "$G" | grep -q 'libtorch' && fail "gpulab links libtorch: $(readelf -d "$G" | grep torch)"
  H="$(dirname "$(readlink -f "$G")")/gpulab-torch"
  readelf -d "$H" | grep -q 'libtorch_cpu' || fail "gpulab-torch does not link libtorch"
  # The launcher's parent is gpulab itself; a training command's process is gpulab-torch.
  "$G" launch --nproc_per_node 1 -- sh -c 'readlink /proc/$PPID/exe' >"$WORK/out" 2>&1 ||
    { cat "$WORK/out"; fail "gpulab launch failed"; }
  [ "$(tail -1 "$WORK/out")" = "$(readlink -f "$G")" ] || fail "launch ran in $(tail -1 "$WORK/out")"
  "$G" --version | grep -q '^gpulab .*(libtorch ' || fail "--version: $("$G" --version)"
  # The user's spelling of the command and its errors stay gpulab's.
  "$G" train --epochs 1 >"$WORK/out" 2>&1
  code=$?
  [ "$code" = 2 ] || { cat "$WORK/out"; fail "train --epochs: exit $code, expected 2"; }
  grep -q 'did you mean --num_epochs? `gpulab train --help`' "$WORK/out" || { cat "$WORK/out"; fail "train --epochs: no hint"; }
  # gpulab alone, its half missing: its own commands work, the others say what to do.
  mkdir "$WORK/alone" && cp "$G" "$WORK/alone/gpulab"
  "$WORK/alone/gpulab" launch --nproc_per_node 1 -- true || fail "gpulab alone: launch failed"
  "$WORK/alone/gpulab" train --model resnet18 >"$WORK/out" 2>&1
  code=$?
  cat "$WORK/out"
  [ "$code" = 1 ] || fail "gpulab alone: train exit $code, expected 1"
  grep -q "^error: \`gpulab train\` is in gpulab's training half, gpulab-torch, which is not beside this gpulab" "$WORK/out" ||
    fail "gpulab alone: not the missing-half error"
  grep -q '^hint: install gpulab and gpulab-torch side by side' "$WORK/out" || fail "gpulab alone: no hint"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo PASS
