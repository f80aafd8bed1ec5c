# Fusion supervisor — every entry point an admin or CI needs.
#   make test   all set-up, then lint, typecheck and every test suite
#   make run    all set-up, then one investigate job over this repository (embedded daemon)
#   make bench  benchmarks, JSON to bench/out/ (make bench-short: fewer iterations, as CI runs it)
SHELL := /bin/bash
NODE_BIN := node_modules/.bin

.PHONY: setup deps system-deps build native lint typecheck test unit run screenshots bench bench-short clean

setup: system-deps deps build

# Debian packages the sandboxes and tests need; installed only when missing, only as root.
system-deps:
	@bash scripts/setup-system.sh

deps: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	# Not `npm ci`: an optional dependency of vite (napi-windows-process-start-time) is absent from
	# the registry, which `npm ci` treats as a lock mismatch; `npm install` skips it and keeps the lock.
	npm install --no-audit --no-fund
	@touch $@

# tsc runs only when a source, a tsconfig or the installed dependencies changed since the last
# build (the stamp lives in dist/, so `make clean` forces a full build); `make daemon` and the
# other targets that need dist/ then start at once.
BUILD_STAMP := dist/.build-stamp
BUILD_SOURCES := $(shell find src sandbox jobs -type f 2>/dev/null) tsconfig.json tsconfig.build.json package.json
build: deps native $(BUILD_STAMP)
$(BUILD_STAMP): $(BUILD_SOURCES) $(wildcard node_modules/.installed)
	$(NODE_BIN)/tsc -p tsconfig.build.json
	@touch $@

# The SO_PEERCRED addon (N-API, C): rebuilt when its sources change.
PEERCRED := native/peercred/build/Release/peercred.node
native: $(PEERCRED)
$(PEERCRED): native/peercred/peercred.c native/peercred/binding.gyp scripts/build-native.sh
	@bash scripts/build-native.sh

lint: deps
	$(NODE_BIN)/eslint .

typecheck: deps
	$(NODE_BIN)/tsc --noEmit -p tsconfig.json

test: setup lint typecheck
	FUSION_TEST_SKIP_BUILD=1 $(NODE_BIN)/vitest run

# The dashboard's screenshots in docs/dashboard/, taken by its browser test (as root: it
# creates test users; needs chromium, which system-deps installs).
screenshots: setup
	FUSION_TEST_SKIP_BUILD=1 FUSION_SCREENSHOTS_DIR=$(CURDIR)/docs/dashboard $(NODE_BIN)/vitest run test/e2e/dashboard/dashboard.test.ts

# The child image too (image-ready: built or refreshed when an engine answers, so `auto` never
# picks an image of other child code); `@` keeps make's echo of the command off stdout, which is
# the answer's.
# Set-up output (npm, node-gyp, tsc, the image build) goes to stderr: stdout is the answer alone.
run:
	@$(MAKE) --no-print-directory setup image-ready >&2
	@node dist/src/cli/main.js investigate --repo $(CURDIR) --wait \
	  --objective "Find where the task state machine and its transition table are implemented" \
	  --background "The daemon moves each Fusion task through the states of its task state machine (see docs/behaviour.md#b2)" \
	  --deliverable "The file and lines that define the states and allowed transitions"

bench: setup
	@mkdir -p bench/out
	node --expose-gc bench/run.mjs

bench-short: setup
	@mkdir -p bench/out
	BENCH_SHORT=1 node --expose-gc bench/run.mjs

# Backend-specific targets (image, base-image…) live in mk/*.mk.
-include mk/*.mk

clean:
	rm -rf dist .fusion-home bench/out native/peercred/build
