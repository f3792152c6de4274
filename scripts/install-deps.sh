#!/usr/bin/env bash
# Installs every Debian 12 package gpulab needs to build, test and run its demo, then the pinned
# Python environment (scripts/install-python-env.sh: the PyTorch wheel whose libtorch gpulab
# builds on, and the references). Idempotent: what is present is skipped. Root or sudo.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: run as root or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi

PKGS=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang-format clang-tidy
  # function extents for the size check (scripts/check-function-size.sh, make function-size)
  universal-ctags
  # clang with its sanitizer and libFuzzer runtimes (make sanitize, make fuzz)
  clang libclang-rt-14-dev
  # libtorch is the PyTorch wheel's (the Python environment below), not Debian's
  python3-venv
  # header-only and small libraries
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  # service: HTTP server, Docker client, state
  libboost-dev libcurl4-openssl-dev libsqlite3-dev libssl-dev
  # image decode for ImageFolder data sets
  libturbojpeg0-dev libpng-dev zlib1g-dev
  # SentencePiece tokenizers for language models (train/data/tokenizer*.cpp)
  libsentencepiece-dev
  # Hugging Face tokenizer.json: pre-tokenizer expressions, NFC (train/data/hf_*.cpp)
  libpcre2-dev libicu-dev
  # tests and micro-benchmarks; valgrind: gpulab must start under it (trainer_cli_test.cpp)
  libgtest-dev libgmock-dev libbenchmark-dev valgrind
  # Debian's interpreter for fixture scripts (the references run in the pinned environment)
  python3 python3-numpy
  # the real data set for accuracy checks and the demo
  dataset-fashion-mnist
  # the real English text corpus for language models (docs/llm-data.md says why this one)
  fortunes
  # real container engine and what test images are made from
  docker.io busybox-static debootstrap openssh-client sshpass
  # network namespaces for multi-host tests, and process tools
  iproute2 procps psmisc curl ca-certificates jq binutils
  # the dashboard's browser tests: a real headless Chromium driven by Selenium
  chromium chromium-driver python3-selenium
  # a real Slurm cluster for the scheduler tests (tests/integration/slurm)
  slurmctld slurmd slurm-client munge
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
else
  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
bash "$(dirname "$0")/install-python-env.sh"
