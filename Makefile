# gpulab: every target calls CMake; `make demo` and `make test` are the README's quick start.
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
GPULAB  := $(BUILD)/gpulab

# ccache across clones: paths relative to the checkout, and precompiled headers allowed.
export CCACHE_BASEDIR   := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime

.PHONY: all deps check-env configure build test demo bench soak stress sanitize-train format format-check \
  function-size tidy clean sanitize fuzz web gpu-bundle gpu-check gpu-prebuilt

all: build

deps:
	@bash scripts/install-deps.sh

# The pinned PyTorch wheel is in .venv (make deps), or the build stops here with what to run.
check-env:
	@CMAKE_FLAGS="$(CMAKE_FLAGS)" bash scripts/check-env.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: check-env $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Installs, builds and runs every unit and integration test but the long ones; ends with the ten
# slowest tests, the skips (any that tests/allowed-skips.txt does not name fails the run) and the
# runner's summary line. Ctrl-C removes what the run started (scripts/test-cleanup.sh).
test: deps
	@$(MAKE) --no-print-directory build
	@bash scripts/run-tests.sh $(BUILD) -LE '^long$$'

# What is long by nature (ctest label long: the accuracy run on the whole Fashion-MNIST, the
# signal stress); CI runs it after `make test`. The fuzzers' short runs are in `make sanitize`.
.PHONY: test-long
test-long: deps
	@$(MAKE) --no-print-directory build
	@JUNIT=$(BUILD)/ctest-junit-long.xml bash scripts/run-tests.sh $(BUILD) -L '^long$$'

# The core, formats, launch, docker and service tests under ASan + UBSan in a clang tree without
# libtorch, and a few seconds of each libFuzzer target (tests labelled fuzz there).
sanitize: deps
	@bash scripts/sanitize.sh $(BUILD)-asan

# train, launch and bench (and the gpulab they run) under ASan + UBSan in a GCC tree, libtorch
# as installed: their unit tests and the CLI interrupt, DDP, sharded and signal stress tests.
# CI runs it after `make sanitize` (.ci/run).
sanitize-train: deps
	@bash scripts/sanitize-train.sh $(BUILD)-asan-train

# libFuzzer over the request path and every file format gpulab reads (safetensors, pickle, IDX,
# token folders, tar, HF config), FUZZ_TIME seconds each (make sanitize runs a few seconds of each).
FUZZ_TIME ?= 600
fuzz: deps
	@bash scripts/fuzz.sh $(BUILD)-asan $(FUZZ_TIME)

# The main job: a short run on the bundled data set (Debian's dataset-fashion-mnist). Builds gpulab
# and its libtorch half: the test binaries, a third of the compile steps, the demo does not run.
demo: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target gpulab
	@bash scripts/demo.sh $(BUILD)

# GPU hosts (docs/gpu.md): gpu-bundle, here on Debian, packs the source and the header-only
# packages (under 20 MB); gpu-check, on a GPU host with the PyTorch wheel, builds the trainer and
# runs every GPU row beside its PyTorch reference (one JSON and one log; no GPU: exit 3 first).
gpu-bundle:
	@bash scripts/gpu-bundle.sh

gpu-check:
	@bash scripts/gpu-check.sh

# Here, for a GPU host whose wheel is torch TORCH (e.g. make gpu-prebuilt TORCH=2.11.0): gpulab
# built against that wheel into .gpu-prebuilt/, which gpu-check uses instead of building there.
gpu-prebuilt:
	@bash scripts/gpu-prebuilt.sh $(TORCH)

# Token folders of the bundled English corpus (Debian's fortunes) for language models.
.PHONY: llm-data
llm-data: deps
	@$(MAKE) --no-print-directory build
	@bash scripts/make-llm-data.sh $(BUILD)

# Signals at the wrong moment: STRESS_RUNS small training jobs (1 process, 2 ranks, 2 ranks
# sharded) each sent SIGINT, SIGTERM or SIGKILL at a random moment (`make test-long` runs 3 under
# ASan's preloaded run-time; ASAN=runtime here does the same).
STRESS_RUNS ?= 100
stress: deps
	@cmake --build $(BUILD) --target gpulab -j $(JOBS)
	@bash tests/integration/stress/signal_stress.sh $(STRESS_RUNS) $(GPULAB)

bench: deps
	@$(MAKE) --no-print-directory build
	@/usr/bin/python3 bench/compare $(BUILD) $(BENCH_ARGS)

# The long soak under faults (tests/service/soak_test.cpp; `make test` runs a short one):
# 10 users, 10,000 operations, 50 SIGKILLs of the service; prints the counts at the end.
# SOAK_HOSTS=3: the soak at three hosts instead (tests/service/soak_hosts_test.cpp: the three lab
# dockerds over mutual TLS, SOAK_OPS operations, SOAK_KILLS faults alternating service SIGKILLs
# and dockerd SIGKILLs), then the load figures at three hosts (hosts_load_test.cpp,
# LOAD_SECONDS per read route; docs/engines.md quotes them).
SOAK_OPS ?= 10000
SOAK_KILLS ?= 50
SOAK_HOSTS ?= 1
LOAD_SECONDS ?= 10
soak: deps
	@cmake --build $(BUILD) --target gpulab test_service -j $(JOBS)
ifeq ($(SOAK_HOSTS),3)
	@GPULAB_SOAK_HOSTS_OPS=$(SOAK_OPS) GPULAB_SOAK_HOSTS_KILLS=$(SOAK_KILLS) \
	  GPULAB_LOAD_SECONDS=$(LOAD_SECONDS) GPULAB_LOAD_CYCLES=10 \
	  $(BUILD)/tests/test_service --gtest_filter='SoakHosts.*:HostsLoad.*'
else
	@GPULAB_SOAK_OPS=$(SOAK_OPS) GPULAB_SOAK_KILLS=$(SOAK_KILLS) \
	  $(BUILD)/tests/test_service --gtest_filter='Soak.*'
endif

format:
	@git ls-files '*.cpp' '*.h' | xargs clang-format -i

format-check:
	@git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run --Werror

# No function over 80 lines in src/ and apps/ (no exemption in use).
function-size:
	@bash scripts/check-function-size.sh

# clang cannot read GCC's precompiled headers: tidy uses its own configure-only tree without them.
# Debian 12's clang 14 cannot parse libtorch 1.13's headers in C++20 (c10::IValue), so the
# modules that include libtorch (train, bench, apps/gpulab/train) are left to the compiler's -Werror.
TIDY_SRCS = $(shell git ls-files src/core src/formats src/gpu src/docker src/service src/builder src/launch \
  apps/gpulab | grep '\.cpp$$' | grep -v '^apps/gpulab/train/')
tidy:
	@cmake -S . -B $(BUILD)-tidy -G Ninja -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DGPULAB_UNITY=OFF $(CMAKE_FLAGS) >/dev/null
	@echo $(TIDY_SRCS) | xargs -P $(JOBS) -n 8 clang-tidy -p $(BUILD)-tidy --quiet

clean:
	rm -rf $(BUILD)

# Dev only (needs the npm registry): refreshes the pinned UI libraries committed in web/vendor/
# from web/package-lock.json. Building never needs it: the vendored files are in the repository.
web:
	cd web && npm ci --no-audit --no-fund
	cp web/node_modules/htm/preact/standalone.module.js web/vendor/htm-preact-standalone.mjs
	cp web/node_modules/uplot/dist/uPlot.iife.min.js web/node_modules/uplot/dist/uPlot.min.css web/vendor/
	cp web/node_modules/htm/LICENSE web/vendor/htm.LICENSE
	cp web/node_modules/uplot/LICENSE web/vendor/uPlot.LICENSE
