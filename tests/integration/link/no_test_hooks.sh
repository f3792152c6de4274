#!/usr/bin/env bash
# The shipped binaries (gpulab and its libtorch half, gpulab-torch) hold no test hook: none of the
# variable names that tests/support/env_test_hooks.cpp reads appears in their strings, while
# gpulab-hooks (the test binary with the hooks) holds each of them, so the names checked are the
# live ones. usage: no_test_hooks.sh HOOKS_SOURCE GPULAB_HOOKS SHIPPED...
set -uo pipefail
SRC=$1
H=$2
shift 2
names=$(grep -oE 'GPULAB_TEST_[A-Z_]+' "$SRC" | sort -u)
[ -n "$names" ] || { echo "FAIL: no hook variable name found in $SRC"; exit 1; }
# One pass of strings over each binary (they are hundreds of MB), matching every name at once.
found_in() { strings -a "$1" | grep -oF -f <(printf '%s\n' $names) | sort -u; }
hooked=$(found_in "$H")
rc=0
for n in $names; do
  grep -qxF "$n" <<<"$hooked" || { echo "FAIL: $H lacks $n (is the hook still linked?)"; rc=1; }
done
for G in "$@"; do
  shipped=$(found_in "$G")
  for n in $names; do
    if grep -qxF "$n" <<<"$shipped"; then
      echo "FAIL: $G holds the test hook name $n"
      rc=1
    fi
  done
done
[ $rc = 0 ] && echo "$(for G in "$@"; do basename "$G"; done | tr '\n' ' ')hold none of $(wc -w <<<"$names") test hook names ($(echo $names)); gpulab-hooks holds all"
exit $rc
