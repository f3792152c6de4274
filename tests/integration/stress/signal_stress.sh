#!/usr/bin/env bash
# Signals at the wrong moment: RUNS small training jobs (1 process, 2 DDP ranks, 2 ranks with
# --shard full), each sent SIGINT, SIGTERM or SIGKILL at a random moment (mid-step, in the loader,
# during a checkpoint write or an all-reduce: the epochs are 16 steps, so checkpoints come every
# second or two). SIGINT/SIGTERM must end with 130/143; SIGKILL with 137. Afterwards no process
# of the job is left, and the newest complete checkpoint loads (--resume auto). Every fifth run
# (and the first) is fp64 and deterministic and, resumed to the end, must equal an uninterrupted
# run of the same layout bit for bit; only a resume from a checkpoint past step 0 counts as
# "resumed bitwise" (a job killed before its first checkpoint starts afresh: that equality is
# counted apart, as "restarted from scratch"). The other runs use 1 or 2 intra-op threads (CI's
# one heap abort came from a single-process run with 2, the default on 2 cores).
# ASAN=runtime runs every gpulab with AddressSanitizer's run-time library preloaded: its allocator
# (red zones, quarantine) catches a double free, a bad free or heap metadata overwritten by a
# library call, where glibc would abort with "corrupted size vs. prev_size" or not notice; code
# is not instrumented (scripts/sanitize-train.sh passes an instrumented gpulab instead). Either
# way, any report fails the run.
# usage: signal_stress.sh RUNS GPULAB [SEED]     (make test: 3 runs; make stress: 100)
set -uo pipefail
RUNS=${1:?runs}
G=${2:?gpulab}
SEED=${3:-$$}
RANDOM=$SEED
WORK=$(mktemp -d -t gpulab-stress-XXXXXX)
PRELOAD=()
mode="plain"
ldd "$G" 2>/dev/null | grep -q libasan && mode="gpulab instrumented with ASan"
if [ "${ASAN:-}" = runtime ]; then
  lib=$(gcc -print-file-name=libasan.so 2>/dev/null)
  [ -f "$lib" ] || { echo "SKIPPED: ASAN=runtime but gcc has no libasan.so"; exit 77; }
  PRELOAD=(env "LD_PRELOAD=$(realpath "$lib")")
  mode="ASan run-time preloaded"
fi
# Reports of an instrumented gpulab, or of the preloaded run-time, land here (ranks' too).
mkdir -p "$WORK/asan"
export ASAN_OPTIONS="log_path=$WORK/asan/report:detect_leaks=0:abort_on_error=0"
export UBSAN_OPTIONS="log_path=$WORK/asan/report:print_stacktrace=1"
if [ ${#PRELOAD[@]} -gt 0 ]; then
  # The check checks itself: a double free under the same preload must leave a report here.
  printf '#include <stdlib.h>\nint main(void) { char *volatile p = malloc(8); free(p); free(p); return 0; }\n' |
    gcc -x c - -o "$WORK/double-free" || { echo "FAIL: cannot build the control"; exit 1; }
  "${PRELOAD[@]}" "$WORK/double-free" 2>/dev/null
  [ "$(find "$WORK/asan" -type f | wc -l)" -gt 0 ] ||
    { echo "FAIL: a double free under the preloaded ASan run-time left no report"; exit 1; }
  rm -f "$WORK"/asan/*
fi
echo "signal stress: $RUNS runs, seed $SEED (pass it again to replay the same choices), $mode"
trap 'pkill -KILL -f "$WORK/" 2>/dev/null; rm -rf "$WORK"' EXIT
show_reports() {
  find "$WORK/asan" -type f -exec sh -c 'for f; do echo "---- $f"; head -n 40 "$f"; done' sh {} + \
    2>/dev/null
}
fail() {
  echo "FAIL: $*"
  show_reports
  exit 1
}

# Sets CMD to a job of LAYOUT (single, ddp, shard) writing to DIR with THREADS intra-op threads
# per process (1 unless set); extra flags after. The job is
# run as "${CMD[@]}", never through a function, so that $! is gpulab itself, not a subshell.
job_cmd() {
  local layout=$1 dir=$2
  shift 2
  local ranks=()
  case "$layout" in
    ddp) ranks=(--nproc_per_node 2) ;;
    shard) ranks=(--nproc_per_node 2 --shard full) ;;
  esac
  # env execs gpulab in its place: $! stays gpulab's pid.
  CMD=("${PRELOAD[@]}" "$G" train --model resnet18 --dataset synthetic --input_size 32 --batch_size 16 --subset 256
       --num_epochs 6 --seed 3 --threads "${THREADS:-1}" --keep_checkpoints 2 "${ranks[@]}" --output_dir "$dir" "$@")
}
job() {
  job_cmd "$@"
  "${CMD[@]}"
}

declare -A reference  # layout -> uninterrupted fp64 weights
ok=0 bitwise=0 scratch=0 early=0
declare -A by_signal=([INT]=0 [TERM]=0 [KILL]=0) by_layout=([single]=0 [ddp]=0 [shard]=0)
declare -A by_threads=([1]=0 [2]=0)
layouts=(single ddp shard)
signals=(INT TERM KILL)
for i in $(seq 1 "$RUNS"); do
  layout=${layouts[$((RANDOM % 3))]}
  sig=${signals[$((RANDOM % 3))]}
  exact=()
  check_bits=0
  THREADS=$((RANDOM % 2 + 1))
  if [ "$i" = 1 ] || [ $((i % 5)) = 0 ]; then
    exact=(--precision fp64 --deterministic --max_steps 24)
    check_bits=1
    THREADS=1  # the uninterrupted reference of its layout runs with 1
  fi
  delay=$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.2 + (r % 300) / 100 }')
  dir="$WORK/run$i"
  job_cmd "$layout" "$dir" "${exact[@]}"
  "${CMD[@]}" >"$dir.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do grep -q '^Training resnet18' "$dir.log" 2>/dev/null && break; sleep 0.1; done
  sleep "$delay"
  kill -"$sig" $pid 2>/dev/null
  wait $pid 2>/dev/null  # bash's own "Killed" line is noise here
  code=$?
  want=$((128 + $(kill -l "$sig")))
  # A job that finished before the signal came ends 0 with its closing line; it is counted
  # apart, not as a run the signal was checked on.
  if [ "$code" = 0 ] && grep -q '^Training took' "$dir.log"; then
    early=$((early + 1))
    echo "run $i: $layout finished before SIG$sig after ${delay} s (not counted)"
    rm -rf "$dir"
    continue
  fi
  [ "$code" = "$want" ] || { tail -n 30 "$dir.log"; fail "run $i ($layout, SIG$sig after ${delay} s): exit $code, expected $want"; }
  sleep 0.5
  if pgrep -f "$dir( |$)" >/dev/null; then
    pgrep -af "$dir( |$)"
    fail "run $i ($layout, SIG$sig): a process of the job is still running"
  fi
  # The newest complete checkpoint loads: resume it (to the end for the exact runs).
  if [ $check_bits = 1 ]; then
    job "$layout" "$dir" "${exact[@]}" --resume auto >"$dir.resume.log" 2>&1 ||
      { tail -n 30 "$dir.resume.log"; fail "run $i ($layout, SIG$sig): resume failed"; }
    if [ -z "${reference[$layout]:-}" ]; then
      job "$layout" "$WORK/ref-$layout" "${exact[@]}" >"$WORK/ref-$layout.log" 2>&1 ||
        { tail -n 30 "$WORK/ref-$layout.log"; fail "the uninterrupted $layout run failed"; }
      reference[$layout]="$WORK/ref-$layout/model.safetensors"
    fi
    cmp -s "$dir/model.safetensors" "${reference[$layout]}" ||
      fail "run $i ($layout, SIG$sig after ${delay} s): resumed weights differ from the uninterrupted run"
    # The trainer's line: "Resumed from DIR (epoch E, step S...)"; none when it started afresh.
    from_step=$(sed -n 's/^.*Resumed from .* (epoch [0-9]*, step \([0-9]*\).*$/\1/p' \
      "$dir.resume.log" | head -1)
    if [ "${from_step:-0}" -gt 0 ]; then bitwise=$((bitwise + 1)); else scratch=$((scratch + 1)); fi
  else
    job "$layout" "$dir" --resume auto --max_steps 1 >"$dir.resume.log" 2>&1 ||
      { tail -n 30 "$dir.resume.log"; fail "run $i ($layout, SIG$sig): the checkpoint left does not load"; }
  fi
  resumed=$(grep -o 'Resumed from [^ ]*' "$dir.resume.log" | head -1)
  echo "run $i: $layout, $THREADS thread(s), SIG$sig after ${delay} s -> exit $code; ${resumed:-no checkpoint yet, started fresh}"
  ok=$((ok + 1))
  by_signal[$sig]=$((by_signal[$sig] + 1))
  by_layout[$layout]=$((by_layout[$layout] + 1))
  by_threads[$THREADS]=$((by_threads[$THREADS] + 1))
  rm -rf "$dir"
done
reports=$(find "$WORK/asan" -type f | wc -l)
echo "signal stress: $ok of $((RUNS - early)) signalled runs held ($early finished first; SIGINT ${by_signal[INT]}, SIGTERM ${by_signal[TERM]}, SIGKILL ${by_signal[KILL]}; single ${by_layout[single]}, ddp ${by_layout[ddp]}, shard ${by_layout[shard]}; 1 thread ${by_threads[1]}, 2 threads ${by_threads[2]}); $bitwise fp64 runs resumed from a checkpoint past step 0 bitwise equal to uninterrupted ones, $scratch fp64 runs killed before their first checkpoint restarted from scratch and equal; no process left behind; $reports sanitizer report(s)"
[ "$reports" = 0 ] || fail "sanitizer reports (below)"
[ "$ok" -gt 0 ] || fail "no run was signalled before it finished"
