#!/usr/bin/env bash
# Fails on any function over MAX lines (default 80) in src/ and apps/: the project's code
# standard is no function over 80 lines, longer ones split into named steps. A marker,
# `NOLINTBEGIN(readability-function-size)` on the line above a function, would exempt it; no
# function has one. Function extents come from Universal Ctags (clang-tidy's readability-function-size cannot cover the modules that
# include libtorch: clang 14 does not parse libtorch 1.13's headers).
set -euo pipefail
cd "$(dirname "$0")/.."
MAX=${MAX:-80}
command -v ctags >/dev/null || { echo "error: ctags not found" >&2; echo "hint: make deps (universal-ctags)" >&2; exit 2; }
ctags --version | grep -q 'Universal Ctags' ||
  { echo "error: ctags is not Universal Ctags" >&2; echo "hint: apt-get install universal-ctags" >&2; exit 2; }

found=0
while IFS=$'\t' read -r lines file line name; do
  if sed -n "$((line - 1))p" "$file" | grep -q 'NOLINTBEGIN(readability-function-size)'; then
    continue
  fi
  echo "$file:$line: $name is $lines lines (limit $MAX): split it into named steps"
  found=1
done < <(git ls-files 'src/*.cpp' 'src/*.h' 'apps/*.cpp' 'apps/*.h' |
  ctags -L - --languages=C++ --c++-kinds=f --fields=+ne -f - |
  awk -F'\t' -v max="$MAX" '{
    l = ""; e = "";
    for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) l = substr($i, 6); if ($i ~ /^end:/) e = substr($i, 5) }
    if (e != "" && e - l + 1 > max) printf "%d\t%s\t%d\t%s\n", e - l + 1, $2, l, $1
  }')
if [ "$found" = 0 ]; then echo "function size: no function over $MAX lines in src/ and apps/"; fi
exit "$found"
