#!/usr/bin/env bash
# Makes the project's Python environment: the pinned PyTorch wheel (gpulab's libtorch), the
# references (torchvision, transformers, tokenizers, ...) and the Gloo headers that match the
# wheel's compiled-in Gloo (Debian sid's libgloo-dev: the wheel ships none). It lives outside the
# clone, keyed by the hash of scripts/python-env.txt, so every clone on the machine (CI's fresh
# one too) reuses it; .venv in the clone links to it. Installed once, offline afterwards. An
# interrupted install resumes where it stopped on the next run (pip's cache keeps the wheels).
# usage: scripts/install-python-env.sh      GPULAB_ENV_CACHE: where environments live
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REQ=$ROOT/scripts/python-env.txt
KEY=$(sha256sum "$REQ" | cut -c1-12)
BASE=${GPULAB_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpulab}
ENV_DIR=$BASE/env-$KEY
PY=/usr/bin/python3

die() {
  echo "install-deps: error: $1" >&2
  echo "install-deps: hint: $2" >&2
  exit 1
}

link_env() { ln -sfn "$ENV_DIR" "$ROOT/.venv"; }

if [ -f "$ENV_DIR/.complete" ]; then
  link_env
  echo "install-deps: Python environment present ($ENV_DIR)"
  exit 0
fi

mkdir -p "$BASE" || die "cannot create $BASE" "set GPULAB_ENV_CACHE to a writable folder"
[ -x "$ENV_DIR/bin/python3" ] || "$PY" -m venv "$ENV_DIR" ||
  die "cannot make a virtual environment with $PY" "install python3-venv (scripts/install-deps.sh does)"

# --no-deps: the file pins every package, so pip resolves nothing and asks for nothing else.
echo "install-deps: installing the pinned Python environment into $ENV_DIR (about 5.5 GB once)"
LOG=$ENV_DIR/pip.log
if ! "$ENV_DIR/bin/pip" install --disable-pip-version-check --no-deps --progress-bar off \
  -r "$REQ" >"$LOG" 2>&1; then
  # The package pip stopped at: the one it could not find, else the last one it was fetching.
  pkg=$(sed -n 's/.*No matching distribution found for \([^ ]*\).*/\1/p' "$LOG" | tail -1)
  [ -n "$pkg" ] || pkg=$(grep -oE '^(Collecting|Downloading|Processing) [^ ]+' "$LOG" | tail -1 | awk '{print $2}')
  tail -5 "$LOG" >&2
  die "pip could not install ${pkg:-a pinned package} (log: $LOG); the rest of the set-up did not run" \
    "check that PyPI is reachable, then run make deps again: it resumes where it stopped"
fi
"$ENV_DIR/bin/pip" check >/dev/null 2>&1 || echo "install-deps: note: pip check reports conflicts (see pip check)"

# Gloo headers for the wheel's compiled-in Gloo, from Debian's own PyTorch 2.x build (sid).
GLOO=$ENV_DIR/gloo
if [ ! -f "$GLOO/include/gloo/algorithm.h" ]; then
  APT=$ENV_DIR/apt
  mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/root"
  echo "deb [trusted=yes] http://deb.debian.org/debian sid main" >"$APT/sources.list"
  APTO=(-o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$APT/lists"
    -o Dir::Cache="$APT/cache" -o Dir::State::status=/dev/null -o APT::Architectures::=amd64
    -o Acquire::Languages=none -o APT::Sandbox::User=root)
  apt-get "${APTO[@]}" update >/dev/null 2>&1 ||
    die "cannot reach Debian's sid archive for libgloo-dev; the rest of the set-up did not run" \
      "check the network, then run make deps again"
  (cd "$APT" && apt-get "${APTO[@]}" download libgloo-dev >/dev/null 2>&1) ||
    die "cannot download libgloo-dev from sid" "run make deps again"
  dpkg -x "$APT"/libgloo-dev_*.deb "$APT/root" || die "cannot unpack libgloo-dev" "run make deps again"
  mkdir -p "$GLOO/include"
  rm -rf "$GLOO/include/gloo" && cp -r "$APT/root/usr/include/gloo" "$GLOO/include/"
  basename "$APT"/libgloo-dev_*.deb >"$GLOO/VERSION"
  rm -rf "$APT"
fi

torch=$("$ENV_DIR/bin/python3" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  die "the installed torch does not import (log: $LOG)" "remove $ENV_DIR and run make deps again"
touch "$ENV_DIR/.complete"
link_env
echo "install-deps: Python environment ready: torch $torch, Gloo headers $(cat "$GLOO/VERSION")"
