#!/usr/bin/env bash
# Every command block of README.md and docs/*.md marked runnable (a fence opened as
# "```sh runnable" or "```bash runnable") runs as written, offline: each block in a fresh folder
# (with tests/ of the source tree at hand for the fixtures it names), in a network namespace of
# its own when this user can make one, with gpulab on PATH. In a block with "$ " prompts only the
# prompted lines are commands (the rest is the output shown); otherwise every line but comments.
# usage: runnable_test.sh SOURCE_DIR GPULAB
set -uo pipefail
SRC=$1
G=$2
WORK=$(mktemp -d -t gpulab-docs-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/bin"
ln -s "$(realpath "$G")" "$WORK/bin/gpulab"
offline=()
if unshare -n true 2>/dev/null; then offline=(unshare -n); fi
blocks=0 commands=0 failed=0
for md in "$SRC/README.md" "$SRC"/docs/*.md; do
  # One file per block: its commands, one per line (backslash continuations joined).
  python3 - "$md" "$WORK/blocks" <<'PY'
import os, re, sys
md, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
lines = open(md).read().split("\n")
n, i = 0, 0
while i < len(lines):
    if re.match(r"^```(sh|bash) runnable\s*$", lines[i]):
        body = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        prompted = [l[2:] for l in body if l.startswith("$ ")]
        cmds = prompted if prompted else [l for l in body if l.strip() and not l.lstrip().startswith("#")]
        joined, cur = [], ""
        for c in cmds:
            cur += c.rstrip("\\").rstrip() + " " if c.rstrip().endswith("\\") else c
            if not c.rstrip().endswith("\\"):
                joined.append(cur)
                cur = ""
        n += 1
        with open(os.path.join(out, "%s.%d" % (os.path.basename(md), n)), "w") as f:
            f.write("\n".join(joined) + "\n")
    i += 1
PY
done
for block in "$WORK"/blocks/*; do
  [ -e "$block" ] || continue
  blocks=$((blocks + 1))
  dir="$WORK/run-$(basename "$block")"
  mkdir -p "$dir"
  ln -s "$SRC/tests" "$dir/tests"
  while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    commands=$((commands + 1))
    start=$(date +%s)
    # In a namespace of its own the loopback starts down: ranks rendezvous on 127.0.0.1.
    (cd "$dir" && PATH="$WORK/bin:$PATH" timeout 600 "${offline[@]}" \
      bash -c "${offline:+ip link set lo up && }$cmd" >"$dir/out" 2>&1)
    rc=$?
    echo "== $(basename "$block"): $cmd -> exit $rc, $(($(date +%s) - start)) s"
    if [ $rc != 0 ]; then
      tail -n 20 "$dir/out"
      failed=$((failed + 1))
    fi
  done <"$block"
done
echo "$blocks runnable blocks, $commands commands, $failed failed${offline:+ (no network: unshare -n)}"
[ "$blocks" -gt 0 ] || { echo "FAIL: no block is marked runnable"; exit 1; }
[ "$failed" = 0 ]
