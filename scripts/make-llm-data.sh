#!/usr/bin/env bash
# Turns the bundled English corpus (Debian's `fortunes`: quotations, literature, science, songs
# and poems, 2.5 MB of prose; docs/llm-data.md says why) into token data folders for language
# models, with no download:
#   OUT/fortunes-bytes   bytes mode (vocab 256)
#   OUT/fortunes-sp4k    SentencePiece BPE, vocab 4096 (when gpulab has SentencePiece)
# Usage: scripts/make-llm-data.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, BUILD_DIR/data)
# Idempotent: a folder that already holds meta.json is kept.
set -euo pipefail

BUILD=${1:-build}
OUT=${2:-$BUILD/data}
GPULAB=$BUILD/gpulab
SRC=/usr/share/games/fortunes

[ -x "$GPULAB" ] || { echo "error: $GPULAB not built" >&2; echo "hint: make build" >&2; exit 2; }
[ -f "$SRC/literature" ] || {
  echo "error: the corpus is missing: $SRC (Debian package fortunes)" >&2
  echo "hint: make deps (or apt-get install fortunes)" >&2
  exit 2
}

# Every English fortune file (the .dat indexes and .u8 links excluded), except the pictures of
# ascii-art, in a fixed order so every machine makes the same tokens.
mapfile -t INPUTS < <(find "$SRC" -maxdepth 1 -type f ! -name '*.*' ! -name ascii-art | LC_ALL=C sort)
mkdir -p "$OUT"

if [ ! -f "$OUT/fortunes-bytes/meta.json" ]; then
  "$GPULAB" data tokenize --input "${INPUTS[@]}" --tokenizer bytes --out "$OUT/fortunes-bytes"
fi

if [ ! -f "$OUT/fortunes-sp4k/meta.json" ]; then
  if "$GPULAB" tokenizer train --input "${INPUTS[@]}" --vocab_size 4096 \
      --out "$OUT/fortunes-sp4k-tokenizer" 2> "$OUT/.sp-train.err"; then
    "$GPULAB" data tokenize --input "${INPUTS[@]}" \
      --tokenizer "$OUT/fortunes-sp4k-tokenizer/tokenizer.model" --out "$OUT/fortunes-sp4k"
  elif grep -q 'without SentencePiece' "$OUT/.sp-train.err"; then
    echo "make-llm-data: gpulab has no SentencePiece; only the bytes folder was made"
  else
    cat "$OUT/.sp-train.err" >&2
    exit 1
  fi
  rm -f "$OUT/.sp-train.err"
fi
echo "make-llm-data: token folders in $OUT"
