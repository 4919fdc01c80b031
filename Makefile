# Tandem: `make run` installs, builds and trains the main job; `make test` runs every test.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
RUN_ARGS ?=

.PHONY: all deps configure build build-cli run test test-sanitize bench clean format

all: build

# The PJRT C API header and the XLA:CPU plugin come from PyPI (scripts/fetch-pjrt.sh); where the
# index cannot be reached (status 3) the build has no XLA backend and says so.
# The Python package's build and test tools (nanobind, pytest, numpy) and the example notebook's
# packages (nbclient, ipykernel, pandas) go into the project virtualenv; where the index cannot
# be reached (status 3) the build has no Python package.
VENV ?= $(CURDIR)/.venv
deps:
	@scripts/install-deps.sh
	@scripts/fetch-pjrt.sh || [ $$? -eq 3 ]
	@scripts/python-env.sh python notebook || [ $$? -eq 3 ]

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DPython_EXECUTABLE=$(VENV)/bin/python >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job needs only the binary: a newcomer does not wait for the test suite to build.
build-cli: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target tandem_cli

run: build-cli
	$(BUILD_DIR)/tandem train $(RUN_ARGS)

# CTest, then the Python package's pytest suite (tests/python) against the package the build
# put together in $(BUILD_DIR)/python, when the build has one.
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)
	@if [ -f $(BUILD_DIR)/python/tandem/__init__.py ]; then \
	  PYTHONPATH=$(BUILD_DIR)/python $(VENV)/bin/python -m pytest -q tests/python; \
	else echo "make test: no Python package in $(BUILD_DIR) (nanobind not found); pytest SKIPPED"; fi

# The library and the tests built with AddressSanitizer and UndefinedBehaviorSanitizer, in a build
# of their own (README.md, "make test"): -O1, what ASan's documentation recommends for reasonable
# speed, and -g1, line tables only: reports keep every frame's file and line, and the build takes a
# quarter less time than with -g's full debug information (no variables, which a report does not
# print); no CUDA (nvcc and ASan do not mix, and CI has no GPU: src/backend/no_cuda.cpp stands
# in), no fuzz sub-build, no benchmark programs (target tandem_tests).
SANITIZE_DIR ?= build-sanitize
SANITIZE_SUPP := $(CURDIR)/tests/sanitizers
# Left out under the sanitizers: the layer probes and the installed package (labels build: they
# check what the compiler accepts and how the package installs, run no code of Tandem's beyond
# what the unit tests run, and cost a configure and a build), the fuzz targets (not built here;
# sanitized in their own sub-build by `make test`), the 5-epoch training run (integration: it
# runs alone, for minutes, the training code that the unit tests and the example already run
# under the sanitizers) and the tests that train models to a peer's accuracy (accuracy,
# tests/long_tests.cmake: 15 minutes under the sanitizers, mostly in the peer's Python and the XLA
# plugin). Leak suppressions, for Open MPI only, are in tests/sanitizers/lsan.supp.
SANITIZE_EXCLUDE_LABELS ?= ^(build|fuzz|integration|accuracy)$$
test-sanitize: export ASAN_OPTIONS = detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0:print_suppressions=0
test-sanitize: export UBSAN_OPTIONS = print_stacktrace=1:halt_on_error=1:suppressions=$(SANITIZE_SUPP)/ubsan.supp
test-sanitize: export LSAN_OPTIONS = suppressions=$(SANITIZE_SUPP)/lsan.supp:print_suppressions=0

test-sanitize: deps
	@cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DTANDEM_SANITIZE=address,undefined \
	  -DTANDEM_CUDA=OFF -DTANDEM_FUZZ=OFF >/dev/null
	@cmake --build $(SANITIZE_DIR) -j $(JOBS) --target tandem_tests
	ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j $(JOBS) -LE '$(SANITIZE_EXCLUDE_LABELS)'

bench: build
	bench/cnn_vs_peers.sh

format:
	@find include src tests examples bench -name '*.h' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
