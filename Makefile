# Tandem: `make run` installs, builds and trains the main job; `make test` runs every test.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
RUN_ARGS ?=

.PHONY: all deps configure build build-cli run test bench clean format

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job needs only the binary: a newcomer does not wait for the test suite to build.
build-cli: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target tandem_cli

run: build-cli
	$(BUILD_DIR)/tandem train $(RUN_ARGS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

bench: build
	bench/cnn_vs_peers.sh

format:
	@find include src tests examples bench -name '*.h' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
