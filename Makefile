# Flotilla — run `make help` for the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/flotilla-gitops/flotilla/pkg/version.Version=$(VERSION) \
           -X github.com/flotilla-gitops/flotilla/pkg/version.Commit=$(COMMIT)
BIN     := $(CURDIR)/bin
# Test binaries built by tools/ are cached here, keyed by their pinned versions,
# so a fresh clone (CI) does not rebuild them.
export FLOTILLA_TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/flotilla/tools
export FLOTILLA_BIN_DIR := $(BIN)
GOTEST_FLAGS ?= -timeout 40m
BENCH ?= .

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
# Built with CGO off, the agent as in the image (Dockerfile): with cgo,
# kustomize's Go plugin loader makes the linker export every symbol (a 115 MB
# agent, not 75 MB), and the benchmarks would measure a binary that never ships.
# The hub and the demo too, so that the three share one compile of their
# dependencies (cgo changes the build of net and everything above it).
build: ## Build the flotilla and flotilla-agent binaries into bin/
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(BIN)/flotilla ./hub/flotilla
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(BIN)/flotilla-agent ./agent/flotilla-agent

# The tool groups the demo's clusters run (not sops, which only tests use).
DEMO_TOOLS := etcd kube kwok volcano

.PHONY: demo
# The tools build beside the binaries: a cold first run spends most of its
# time compiling, and the other build fills the gaps of each (its links, the
# narrow ends of its package graph).
demo: ## Start a local demo fleet (Git server, 3 clusters, 3 agents) until Ctrl-C
	@tools/build.sh "$(BIN)" $(DEMO_TOOLS) & tools=$$!; \
	$(MAKE) --no-print-directory build && \
	CGO_ENABLED=0 go build -o $(BIN)/flotilla-demo ./test/demo/cmd/flotilla-demo; \
	built=$$?; wait $$tools && exit $$built
	@$(BIN)/flotilla-demo $(DEMO_FLAGS)

.PHONY: tools
tools: ## Build the pinned test binaries (kube-apiserver, etcd, kwok, Volcano, …) into bin/ if missing or stale
	@tools/build.sh "$(BIN)"

.PHONY: prereqs
prereqs: ## Check the host tools the tests and the demo need (tools/prereqs.sh)
	@tools/prereqs.sh

.PHONY: test
test: prereqs tools build ## Build everything and run all tests against real components
	go test $(GOTEST_FLAGS) ./...
	cd test/monitoring && go test $(GOTEST_FLAGS) ./...

.PHONY: test-unit
test-unit: ## Run every test that needs no cluster (no tools built; -short skips the rest)
	go test -short -timeout 10m ./...
	cd test/monitoring && go test -short -timeout 10m ./...

FUZZTIME ?= 5s
.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 5s) beyond its seed corpus
	@tools/fuzz.sh $(FUZZTIME)

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, and go.mod/go.sum tidy (root, tools/ and test/monitoring)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	cd test/monitoring && go vet ./...
	@tools/build.sh "$(BIN)" staticcheck
	$(BIN)/staticcheck ./...
	cd test/monitoring && $(BIN)/staticcheck ./...
	@# tools/flux: -e, because source-controller's tests import a module the Go module proxy does not serve (tools/README.md).
	@# tools/gitea only pins a version (Gitea is built inside its own module, whose replaces a requirer would ignore): nothing to tidy.
	@for m in . $$(ls -d tools/*/ | sed 's|/$$||' | grep -vx tools/gitea) test/monitoring; do \
		e=; [ $$m != tools/flux ] || e=-e; \
		if ! (cd $$m && GOFLAGS=-tags=tools GOTOOLCHAIN=local go mod tidy $$e -diff >/dev/null); then \
			echo "go.mod/go.sum of $$m are not tidy: run (cd $$m && GOFLAGS=-tags=tools go mod tidy)"; exit 1; fi; \
	done

.PHONY: bench
bench: tools build ## Run the benchmarks; results go to test/results/bench.txt
	@mkdir -p test/results
	set -o pipefail; go test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 90m ./test/bench/... | tee test/results/bench.txt

.PHONY: bench-flux
bench-flux: tools build ## Flux vs flotilla-agent side by side (builds the pinned Flux controllers); table in test/results/bench-peer-flux.md
	@tools/build.sh "$(BIN)" flux
	@mkdir -p test/results
	set -o pipefail; go test -run '^$$' -bench 'PeerFlux$$' -benchtime 1x -timeout 150m ./test/bench/ | tee test/results/bench-peer-flux.txt

.PHONY: bench-flux-fix
bench-flux-fix: tools build ## A bad push, then its fix: flotilla-agent vs Flux with and without CancelHealthCheckOnNewRevision; table in test/results/bench-peer-flux-fix.md
	@tools/build.sh "$(BIN)" flux
	@mkdir -p test/results
	set -o pipefail; go test -run '^$$' -bench 'PeerFluxFix' -benchtime 1x -timeout 90m ./test/bench/ | tee test/results/bench-peer-flux-fix.txt

.PHONY: clean
clean: ## Remove bin/ (the tools cache outside the checkout is kept)
	rm -rf $(BIN)
