#!/usr/bin/env bash
# Makes the environment of bench/compare's `grpo` reference (TRL's GRPOTrainer): a small virtual
# environment laid over the project's pinned one (a .pth file puts .venv's packages on its path, so
# torch and transformers are the very ones gpulab is compared with) holding only TRL and what it
# pulls (scripts/bench-trl-env.txt). Kept apart so the tests' environment, and CI, never carry
# datasets/pandas/pyarrow. Keyed by both files' hashes; prints the interpreter's path.
# usage: scripts/install-bench-trl.sh      GPULAB_ENV_CACHE: where environments live
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE_SP=$(ls -d "$ROOT"/.venv/lib/python3*/site-packages 2>/dev/null | head -1)
[ -n "$BASE_SP" ] || { echo "install-bench-trl: error: no .venv; run make deps first" >&2; exit 1; }
KEY=$(cat "$ROOT/scripts/python-env.txt" "$ROOT/scripts/bench-trl-env.txt" | sha256sum | cut -c1-12)
BASE=${GPULAB_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpulab}
ENV_DIR=$BASE/bench-trl-$KEY
if [ ! -f "$ENV_DIR/.complete" ]; then
  mkdir -p "$BASE"
  [ -x "$ENV_DIR/bin/python3" ] || /usr/bin/python3 -m venv "$ENV_DIR"
  SP=$(ls -d "$ENV_DIR"/lib/python3*/site-packages | head -1)
  echo "$BASE_SP" >"$SP/zz-gpulab-env.pth"
  echo "install-bench-trl: installing TRL into $ENV_DIR (once)" >&2
  "$ENV_DIR/bin/pip" install --disable-pip-version-check --no-deps --progress-bar off \
    -r "$ROOT/scripts/bench-trl-env.txt" >"$ENV_DIR/pip.log" 2>&1 ||
    { tail -5 "$ENV_DIR/pip.log" >&2; echo "install-bench-trl: error: pip failed (log: $ENV_DIR/pip.log); check that PyPI is reachable and run it again" >&2; exit 1; }
  "$ENV_DIR/bin/python3" -c "import trl, torch" >&2
  touch "$ENV_DIR/.complete"
fi
echo "$ENV_DIR/bin/python3"
