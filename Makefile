# feedline: every target does its own set-up on a fresh Debian 12 machine.
#   make demo   build and run the main job on the built-in dataset
#   make test   build and run every test (C++ via ctest; Python under Debian's torch 1.13)
#   make test-torch2       every Python suite again under torch 2.14.1 (a pip venv in the cache, scripts/envcache.py; CI)
#   make test-pip-install  `pip install .` into a fresh venv, as a new user does (CI)
#   make bench  build and run the benchmarks, printing ratios
#   make asan   C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan   C++ tests under ThreadSanitizer
#   make lint-cc  clang-tidy (.clang-tidy, warnings are errors) over src/, then the clang-format check
#   make fuzz   libFuzzer harnesses, FUZZ_SECONDS each
#   make bench-peers  feedline vs DALI, SPDL, tf.data, Grain, torchvision... (bench/peers/)
#   make lint   ruff and mypy over the Python (pyproject.toml; a pip venv in the cache, CI)

JOBS ?= $(shell nproc)
WERROR ?= $(if $(CI),ON,OFF)
CMAKE_FLAGS ?=

BUILD := build
# Virtual environments live outside the clone, keyed by a hash of their
# interpreter and requirements (scripts/envcache.py): a fresh clone reuses
# them, a changed requirements file or a new machine makes them again.
FEEDLINE_CACHE ?= $(HOME)/.cache/feedline
export FEEDLINE_CACHE
HOST_PYTHON ?= python3
ENVCACHE := $(HOST_PYTHON) scripts/envcache.py
# Debian's interpreter, which sees python3-torch; the python3 first on PATH may not.
PYTHON := /usr/bin/python3
BUILD_ASAN := build-asan
BUILD_TSAN := build-tsan
BUILD_TIDY := build-tidy

.PHONY: all deps build demo-build demo test torch2-build test-torch2 test-pip-install bench bench-peers lint asan tsan lint-cc fuzz envs format clean

all: build

deps:
	@bash scripts/install-deps.sh

# Apache Arrow C++ and Parquet for the columnar sources (docs/columnar.md):
# a pyarrow wheel's headers and libraries in a small venv of the cache
# (~170 MB, no dependencies), which every build links and the Python tests
# import to write their Parquet files (PYARROW_DIR's folder on sys.path).
ARROW_PIP := --no-deps -r scripts/requirements-arrow.txt
VENV_ARROW := $(shell $(ENVCACHE) path arrow --python $(HOST_PYTHON) -- $(ARROW_PIP))
# If PyPI cannot be reached, the build goes on without Arrow (make demo must
# not need the network) and `make test` fails saying so (test-arrow-check).
PYARROW_DIR = $(wildcard $(VENV_ARROW)/lib/python3*/site-packages/pyarrow)
ARROW_FLAGS = $(if $(PYARROW_DIR),-DFEEDLINE_WITH_ARROW=ON -DFEEDLINE_PYARROW_DIR=$(PYARROW_DIR),-DFEEDLINE_WITH_ARROW=AUTO)
export FEEDLINE_PYARROW_DIR = $(PYARROW_DIR)

$(VENV_ARROW)/.installed:
	$(ENVCACHE) make arrow --python $(HOST_PYTHON) -- $(ARROW_PIP) >/dev/null || \
	  echo "warning: no pyarrow venv (is PyPI reachable?): building without Parquet and Arrow sources" >&2

$(BUILD)/CMakeCache.txt: | deps $(VENV_ARROW)/.installed
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DFEEDLINE_WERROR=$(WERROR) \
	  -DPython_EXECUTABLE=$(PYTHON) $(ARROW_FLAGS) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The built-in dataset: ImageNet-like images derived from tests/data/photos.
DEMO_IMAGES ?= 1024
DEMO_DATA := $(BUILD)/data/imagenet-like-$(DEMO_IMAGES)
# The demo builds only what it runs (the CLI and the Python package), so a
# fresh machine gets there in minutes; `make test` builds everything.
demo-build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target feedline_cli feedline_python

$(DEMO_DATA)/class_0000: | demo-build
	./$(BUILD)/tools/feedline gen-dataset $(DEMO_DATA) --images $(DEMO_IMAGES) --classes 10

$(DEMO_DATA)-shards/manifest.json: | $(DEMO_DATA)/class_0000
	./$(BUILD)/tools/feedline pack $(DEMO_DATA) $(DEMO_DATA)-shards --overwrite

# The main job: a short training run fed by torch's DataLoader, then by
# feedline, each diagnosed by the doctor (python/feedline/demo.py).
demo: demo-build $(DEMO_DATA)/class_0000 $(DEMO_DATA)-shards/manifest.json
	PYTHONPATH=$(CURDIR)/$(BUILD)/python $(PYTHON) -m feedline.demo --data $(DEMO_DATA) \
	  --shards $(DEMO_DATA)-shards --out $(BUILD)/demo

# The S3-compatible server the object-store tests start (moto's, ~100 MB,
# no torch): a venv in the cache like the others (tests/integration/s3_server.py).
S3_PIP := -r scripts/requirements-s3.txt
VENV_S3 := $(shell $(ENVCACHE) path s3 --python $(HOST_PYTHON) -- $(S3_PIP))

$(VENV_S3)/.installed:
	$(ENVCACHE) make s3 --python $(HOST_PYTHON) -- $(S3_PIP) >/dev/null

# The object-store peers for make bench (bench/e2e/s3_bench.py): s3torchconnector without its
# torch (the torch 2 venv's is used), its CRT client and s3fs.
S3PEERS_PIP := --no-deps s3torchconnector==1.5.0 ++ -r bench/e2e/requirements-s3peers.txt
VENV_S3PEERS := $(shell $(ENVCACHE) path s3peers --python $(HOST_PYTHON) -- $(S3PEERS_PIP))

$(VENV_S3PEERS)/.installed:
	$(ENVCACHE) make s3peers --python $(HOST_PYTHON) -- $(S3PEERS_PIP) >/dev/null

test: build $(VENV_S3)/.installed
	@$(PYTHON) -c "import sys; sys.path.insert(0, '$(BUILD)/python'); import feedline._C as C; \
	  sys.exit(0 if C.columnar_supported() else 'make test: this build has no Arrow (no pyarrow venv: see the warning \
	  above); the Parquet suites need it (scripts/requirements-arrow.txt)')"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	FEEDLINE_S3_VENV=$(VENV_S3) FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline PYTHONPATH=$(CURDIR)/$(BUILD)/python \
	  $(PYTHON) -m pytest -q -rs -p no:cacheprovider tests/integration tests/python
	@echo "benchmark smoke (quick mode, so the benchmark code cannot rot):"
	./$(BUILD)/bench/engine_benchmark --benchmark_min_time=0.01 --benchmark_filter='BM_EngineTrivialOp' \
	  --benchmark_out=bench/results/engine-quick.json --benchmark_out_format=json >/dev/null
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/image_bench.py --quick >/dev/null
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/storage_bench.py --quick >/dev/null
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/tuner_bench.py --quick >/dev/null
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/startup_bench.py --quick >/dev/null
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/fields_bench.py --quick >/dev/null
	$(PYTHON) bench/e2e/tokens_bench.py --quick >/dev/null
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline PYTHONPATH=$(CURDIR)/$(BUILD)/python \
	  $(PYTHON) bench/e2e/doctor_accuracy_bench.py --quick >/dev/null
	$(PYTHON) bench/summary.py --quick >/dev/null

# The torch 2.x generation: a venv of the python3 first on PATH (not
# Debian's) with the pinned torch 2.14.1 + torchvision 0.29.1 and the test
# dependencies, the extension and CLI built for that interpreter in their own
# build directory, and every Python suite run under it. Kept out of `make test`
# so that a user's first run downloads nothing large (~5.5 GB in the venv).
TORCH2_PIP := -r scripts/requirements-torch2.txt
VENV_TORCH2 := $(shell $(ENVCACHE) path torch2 --python $(HOST_PYTHON) -- $(TORCH2_PIP))
BUILD_TORCH2 := build-torch2

$(VENV_TORCH2)/.installed:
	$(ENVCACHE) make torch2 --python $(HOST_PYTHON) -- $(TORCH2_PIP) >/dev/null

$(BUILD_TORCH2)/CMakeCache.txt: | deps $(VENV_TORCH2)/.installed $(VENV_ARROW)/.installed
	cmake -S . -B $(BUILD_TORCH2) -DCMAKE_BUILD_TYPE=Release -DFEEDLINE_WERROR=$(WERROR) $(ARROW_FLAGS) \
	  -DPython_EXECUTABLE=$(VENV_TORCH2)/bin/python -DFEEDLINE_BUILD_TESTS=OFF \
	  -DFEEDLINE_BUILD_BENCH=OFF -DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF $(CMAKE_FLAGS)

torch2-build: deps $(VENV_TORCH2)/.installed $(BUILD_TORCH2)/CMakeCache.txt
	cmake --build $(BUILD_TORCH2) -j $(JOBS) --target feedline_cli feedline_python feedline_example_ops

test-torch2: torch2-build $(VENV_S3)/.installed
	$(VENV_TORCH2)/bin/python -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
	FEEDLINE_S3_VENV=$(VENV_S3) FEEDLINE_BIN=$(CURDIR)/$(BUILD_TORCH2)/tools/feedline PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  $(VENV_TORCH2)/bin/python -m pytest -q -rs -p no:cacheprovider tests/integration tests/python
	@echo "benchmark smoke under torch 2 (quick mode, so their code cannot rot): Parquet images, Parquet text, trainer frameworks"
	FEEDLINE_BIN=$(CURDIR)/$(BUILD_TORCH2)/tools/feedline FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  $(VENV_TORCH2)/bin/python bench/e2e/columnar_bench.py --quick >/dev/null
	FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python $(VENV_TORCH2)/bin/python bench/e2e/pack_text_bench.py --quick >/dev/null
	FEEDLINE_BIN=$(CURDIR)/$(BUILD_TORCH2)/tools/feedline FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  $(VENV_TORCH2)/bin/python bench/e2e/frameworks_bench.py --quick >/dev/null

# A new user's install (README): `pip install .` into a fresh venv of the
# python3 on PATH, build isolation, dependencies from PyPI; then the installed
# package loads a generated folder (scripts/check-pip-install.sh).
test-pip-install: demo-build
	HOST_PYTHON=$(HOST_PYTHON) FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline bash scripts/check-pip-install.sh

# BENCH_IMAGES / BENCH_REPEATS choose the dataset size and repeats.
BENCH_IMAGES ?= 2000
BENCH_REPEATS ?= 3
STARTUP_FILES ?= 200000
bench: build torch2-build $(VENV_S3)/.installed $(VENV_S3PEERS)/.installed
	./$(BUILD)/bench/engine_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
	  --benchmark_out=bench/results/engine.json --benchmark_out_format=json
	./$(BUILD)/bench/color_ops_benchmark --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
	  --benchmark_out=bench/results/color_ops.json --benchmark_out_format=json
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/image_bench.py \
	  --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS)
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/storage_bench.py \
	  --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS)
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/tuner_bench.py \
	  --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS)
# Start-up against torchvision's scan (issue 15): 200,000 files; STARTUP_FILES=1000000 for the 1M target.
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/startup_bench.py \
	  --files $(STARTUP_FILES) --repeats $(BENCH_REPEATS)
# Any dataset (issue 16): a torchvision Compose vs the native recipe, a user Python op (feedline threads vs
# torch workers), WebDataset fields vs the webdataset library (its venv in the cache).
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline $(PYTHON) bench/e2e/fields_bench.py \
	  --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS)
# Augmentation recipes (issue 17): the reference "new recipe" and a timm-like one as torchvision v2
# Composes, feedline vs DataLoader + torchvision v2 (needs transforms.v2: the torch 2 venv).
	FEEDLINE_BIN=$(CURDIR)/$(BUILD_TORCH2)/tools/feedline FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  $(VENV_TORCH2)/bin/python bench/e2e/augment_bench.py --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS)
# Token streams (issue 18): TokenLoader vs nanoGPT get_batch vs litdata (its venv in the cache) on 1e9 tokens.
	$(PYTHON) bench/e2e/tokens_bench.py --repeats $(BENCH_REPEATS)
# The doctor's predictions against re-measurement, per rule: doctor_bench.py's input-side cases and
# the step, what-if and straggler ones (issues 12 and 19: the tests check consistency, not figures).
	FEEDLINE_BIN=$(CURDIR)/$(BUILD)/tools/feedline PYTHONPATH=$(CURDIR)/$(BUILD)/python \
	  $(PYTHON) bench/e2e/doctor_accuracy_bench.py --repeats $(BENCH_REPEATS)
# Object stores (issue 35): the train recipe from a bucket (moto + a latency proxy), feedline vs
# s3torchconnector and s3fs, 0 and 20 ms added per request; raw large-object reads.
	FEEDLINE_BIN=$(CURDIR)/$(BUILD_TORCH2)/tools/feedline FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  FEEDLINE_S3_VENV=$(VENV_S3) FEEDLINE_S3PEERS=$(VENV_S3PEERS) \
	  $(VENV_TORCH2)/bin/python bench/e2e/s3_bench.py --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS)
# Parquet (issue 36): a Hub-layout image set as 8 shards, feedline vs datasets + DataLoader and vs the same files.
	FEEDLINE_BIN=$(CURDIR)/$(BUILD_TORCH2)/tools/feedline FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  $(VENV_TORCH2)/bin/python bench/e2e/columnar_bench.py --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS)
# FineWeb-style Parquet to tokens: pack-text vs datasets.map, the same tokenizer, 10^5 documents.
	FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  $(VENV_TORCH2)/bin/python bench/e2e/pack_text_bench.py --repeats $(BENCH_REPEATS)
# Trainer frameworks (issue 37): Lightning, Accelerate and the HF Trainer fitting a small CNN, each with its
# usual DataLoader and with feedline.
	FEEDLINE_BIN=$(CURDIR)/$(BUILD_TORCH2)/tools/feedline FEEDLINE_PYTHONPATH=$(CURDIR)/$(BUILD_TORCH2)/python \
	  $(VENV_TORCH2)/bin/python bench/e2e/frameworks_bench.py --images $(BENCH_IMAGES) --repeats $(BENCH_REPEATS) --batches 20
	@echo; echo "=== all benchmarks (bench/results/summary.md) ==="
	$(PYTHON) bench/summary.py

# feedline beside the real peers, each in its own pinned virtual environment
# in the cache (FEEDLINE_CACHE, made once per requirements; pip from the python3 on PATH), on
# the same generated datasets, interleaved rounds (bench/peers/run.py).
# PEERS_FLAGS=--quick is the CI smoke.
PEERS_PYTHON ?= python3
PEERS_FLAGS ?=
bench-peers: deps
	$(PEERS_PYTHON) bench/peers/run.py $(PEERS_FLAGS)

# Python lint and type checks: ruff (python, bench, tests) and mypy (the
# package; its public API fully annotated), both configured in pyproject.toml,
# from a venv of the python3 on PATH with the pinned versions. mypy checks
# against the real torch of make test-torch2 (its pin), installed without its
# dependencies: type checking needs its Python files, not the ~3 GB of CUDA
# libraries (a 1.4 GB venv in the cache, made in about a minute).
LINT_PIP := -r scripts/requirements-lint.txt ++ --no-deps $(shell grep -E '^torch==' scripts/requirements-torch2.txt)
VENV_LINT := $(shell $(ENVCACHE) path lint --python $(HOST_PYTHON) -- $(LINT_PIP))

$(VENV_LINT)/.installed:
	$(ENVCACHE) make lint --python $(HOST_PYTHON) -- $(LINT_PIP) >/dev/null

lint: $(VENV_LINT)/.installed
	$(VENV_LINT)/bin/ruff check python bench tests
	$(VENV_LINT)/bin/mypy

# Sanitizer builds use clang: its TSan is the reference implementation and
# -Wthread-safety checks our lock annotations in the same build.
asan: deps $(VENV_ARROW)/.installed
	CXX=clang++ cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DFEEDLINE_SANITIZE=address $(ARROW_FLAGS) \
	  -DFEEDLINE_BUILD_BENCH=OFF -DFEEDLINE_BUILD_PYTHON=OFF -DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF -DFEEDLINE_WERROR=$(WERROR)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 ARROW_DEFAULT_MEMORY_POOL=system \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

tsan: deps $(VENV_ARROW)/.installed
	CXX=clang++ cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFEEDLINE_SANITIZE=thread $(ARROW_FLAGS) \
	  -DFEEDLINE_BUILD_BENCH=OFF -DFEEDLINE_BUILD_PYTHON=OFF -DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF -DFEEDLINE_WERROR=$(WERROR)
	cmake --build $(BUILD_TSAN) -j $(JOBS)
	cd $(BUILD_TSAN) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ARROW_DEFAULT_MEMORY_POOL=system \
	  ctest --output-on-failure -j $(JOBS)

# clang-tidy reads the compile database of a clang configure (nothing is
# built), one process per src/*.cc, $(JOBS) at a time, except for a file
# whose preprocessed text, flags, checks and tool are those of an earlier
# clean run (scripts/tidy-cached.py: its key in $(FEEDLINE_CACHE)/tidy; a
# finding is never cached); then every tracked C++ file must already be
# clang-formatted (`make format` fixes them).
lint-cc: deps $(VENV_ARROW)/.installed
	CXX=clang++ cmake -S . -B $(BUILD_TIDY) -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON $(ARROW_FLAGS) \
	  -DFEEDLINE_BUILD_BENCH=OFF -DFEEDLINE_BUILD_PYTHON=OFF -DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF >/dev/null
	$(HOST_PYTHON) scripts/tidy-cached.py $(BUILD_TIDY) --jobs $(JOBS)
	clang-format --dry-run --Werror $$(git ls-files '*.h' '*.cc')

# libFuzzer harnesses under ASan+UBSan, FUZZ_SECONDS each (CI runs a short pass).
FUZZ_SECONDS ?= 30
# A fixed seed makes a short pass repeat its path (CI: a regression gate);
# empty = a fresh seed each run (exploring: run it longer, FUZZ_SECONDS=600).
FUZZ_SEED ?=
BUILD_FUZZ := build-fuzz
FUZZERS := sampler_state_fuzzer image_decode_fuzzer shard_reader_fuzzer manifest_fuzzer tar_dataset_fuzzer png_decode_fuzzer \
  megatron_index_fuzzer field_parts_fuzzer token_shard_fuzzer
fuzz: deps $(VENV_ARROW)/.installed
	CXX=clang++ cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFEEDLINE_SANITIZE=address $(ARROW_FLAGS) \
	  -DFEEDLINE_BUILD_FUZZ=ON -DFEEDLINE_BUILD_BENCH=OFF -DFEEDLINE_BUILD_PYTHON=OFF -DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF -DFEEDLINE_WERROR=$(WERROR)
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target $(FUZZERS)
	@for f in $(FUZZERS); do \
	  echo "fuzzing $$f for $(FUZZ_SECONDS) s"; \
	  corpus=tests/fuzz/corpus/$${f%_fuzzer}; [ -d $$corpus ] || corpus=$${corpus%_decode}; \
	  mkdir -p $(BUILD_FUZZ)/corpus-$$f; \
	  ./$(BUILD_FUZZ)/tests/$$f $(BUILD_FUZZ)/corpus-$$f $$( [ -d $$corpus ] && echo $$corpus ) \
	    -artifact_prefix=$(BUILD_FUZZ)/ \
	    -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(if $(FUZZ_SEED),-seed=$(FUZZ_SEED)) \
	    > $(BUILD_FUZZ)/$$f.log 2>&1; rc=$$?; \
	  if [ $$rc -ne 0 ]; then tail -60 $(BUILD_FUZZ)/$$f.log; exit 1; fi; \
	  grep -E 'stat::(number_of_executed_units|new_units_added)' $(BUILD_FUZZ)/$$f.log; \
	done

# Every cached environment CI uses, made where missing (.ci/run runs this
# in the background beside make test); each one's own target makes it too.
envs: $(VENV_TORCH2)/.installed $(VENV_LINT)/.installed $(VENV_S3)/.installed $(VENV_ARROW)/.installed
	$(PEERS_PYTHON) bench/peers/envs.py --venvs-only

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

# The cached environments ($(FEEDLINE_CACHE)) are not the clone's: `python3
# scripts/envcache.py prune` removes those unused for 30 days.
clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) $(BUILD_FUZZ) $(BUILD_TIDY) $(BUILD_TORCH2) build-peers
