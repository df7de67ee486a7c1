# Simba for Go: build, test and lint every module of the workspace.
#
# The modules are the `use` entries of go.work, in that order. Targets that
# need servers start them with tools/testenv (installing the Debian packages
# on first use) and stop them afterwards; see tools/testenv/lib.sh for the
# ports and settings. The release tool (tools/release) does the module
# work: tidying, the go-get check, the oldest-Go check and the release.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
GOFMT ?= gofmt
# 30m: the robustness suite's package runs its CI profile, self-test and
# short topology runs one after the other, past go test's default 10m.
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m
# The ratio chart make bench writes; tools/bench/README.md embeds it.
BENCH_SVG ?= tools/bench/ratios.svg
GOLANGCI_LINT_VERSION ?= v2.15.0
ACTIONLINT_VERSION ?= v1.7.12
GOVULNCHECK_VERSION ?= v1.9.0
BIN := $(CURDIR)/bin
GOLANGCI_LINT := $(BIN)/golangci-lint
ACTIONLINT := $(BIN)/actionlint
TESTENV := $(CURDIR)/tools/testenv
RELEASE := GO=$(GO) $(GO) run ./tools/release

# The library modules, and the module users go install the simba command
# from, build with the oldest supported Go release: their go.mod says
# "go 1.25.0", and min-go-check builds and vets them with the newest patch
# release of Go 1.25.
GO_MIN_TOOLCHAIN ?= go1.25.14
MIN_GO_MODULES ?= core backend-jdbc backend-redis backend-zk fxsimba metrics cgo-bindings tools

# Module directories relative to the root, without the leading "./".
MODULES := $(patsubst ./%,%,$(shell $(GO) work edit -json | sed -n 's/^.*"DiskPath": *"\(.*\)".*$$/\1/p'))

export BENCH_QUICK

# load_module: in a loop over $m, lists the module's packages in $pkgs.
# It fails, printing go's message, when the module cannot be loaded (a
# missing directory, a broken go.mod or go.work), and leaves $pkgs empty
# when the module has no package yet.
define load_module
{ pkgs=$$(cd $$m && $(GO) list -e ./... 2>&1) || { echo "$$pkgs"; echo "cannot load module $$m"; false; }; } && \
pkgs=$$(grep -v 'matched no packages' <<<"$$pkgs" || true)
endef

.PHONY: help test test-modules test-core goget-check min-go-check demo lint lint-tool tidy-check vuln tidy \
	release-check bench servers-up servers-down modules libsimba wheel chaos soak topology

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

modules: ## print the modules of the workspace
	@printf '%s\n' $(MODULES)

test: ## servers up, go vet + race tests of every module (features on every backend), servers down; goget-check, min-go-check
	@$(TESTENV)/tools
	@status=0; \
	SIMBA_FEATURES_BACKENDS=$${SIMBA_FEATURES_BACKENDS:-all} $(TESTENV)/with-servers $(MAKE) --no-print-directory test-modules || status=1; \
	echo; echo "==================== goget-check ===================="; \
	$(MAKE) --no-print-directory goget-check || status=1; \
	echo; echo "==================== min-go-check ===================="; \
	$(MAKE) --no-print-directory min-go-check || status=1; \
	exit $$status

# test-modules runs vet and the tests of every module with whatever
# SIMBA_TEST_* variables are set; `make test` sets them.
test-modules:
	@if [ -z "$(MODULES)" ]; then echo "no modules found in go.work"; exit 1; fi
	@failed=(); out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	for m in $(MODULES); do \
		echo; echo "==================== module $$m ===================="; \
		if ! { $(load_module); }; then failed+=("$$m (load)"); continue; fi; \
		if [ -z "$$pkgs" ]; then echo "(no Go packages yet: skipped)"; continue; fi; \
		(cd $$m && $(GO) vet ./...) || failed+=("$$m (vet)"); \
		(cd $$m && $(GO) test $(GO_TEST_FLAGS) ./... 2>&1) | tee -a "$$out" || failed+=("$$m (test)"); \
	done; \
	echo; \
	if [ $${#failed[@]} -gt 0 ]; then echo "FAILED: $${failed[*]}"; fi; \
	echo "packages: $$(grep '^ok ' "$$out" | grep -vc 'no tests to run' || true) passed," \
		"$$(grep -cE '^FAIL[[:space:]]+[^[:space:]]' "$$out" || true) failed," \
		"$$(grep -cE '^\?[[:space:]]|^ok .*no tests to run' "$$out" || true) skipped"; \
	[ $${#failed[@]} -eq 0 ]

test-core: ## go vet + race tests of core only, no servers
	cd core && $(GO) vet ./... && $(GO) test $(GO_TEST_FLAGS) ./...

goget-check: ## go get each backend and fxsimba outside the workspace from a proxy of the working tree; go install simba
	@$(RELEASE) goget

min-go-check: ## build and vet the library modules and tools with the oldest supported Go (skipped when it cannot be had)
	@$(RELEASE) min-go -go $(GO_MIN_TOOLCHAIN) $(MIN_GO_MODULES)

libsimba: ## build the C API: cgo-bindings/build/libsimba.so, simba.h and simba.pc (needs a C compiler)
	@GO=$(GO) cgo-bindings/scripts/build.sh

wheel: ## build libsimba and the Python wheel that carries it: cgo-bindings/build/simba-*.whl (offline; python3-setuptools, python3-wheel)
	@GO=$(GO) cgo-bindings/scripts/wheel.sh

demo: ## run the demo on the in-memory backend
	@if [ ! -d tools/cmd/simba ]; then echo "make demo: tools/cmd/simba does not exist yet"; exit 1; fi
	@echo "make demo: compiling the simba command first (on the first run it builds every backend: a minute or more; later runs, seconds)"
	$(GO) run ./tools/cmd/simba demo

bench: ## run tools/bench against real servers and write its ratio chart (BENCH_QUICK=1: under 2 minutes)
	@if [ "$$(cd tools/bench 2>/dev/null && $(GO) list -e -f '{{.Name}}' . 2>/dev/null)" != main ]; then \
		echo "make bench: tools/bench has no main package yet"; exit 1; fi
	@$(TESTENV)/with-servers $(GO) run ./tools/bench -svg $(BENCH_SVG)

lint: lint-tool ## gofmt, go vet and golangci-lint on every module; actionlint on the workflows; tidy-check
	@if [ -z "$(MODULES)" ]; then echo "no modules found in go.work"; exit 1; fi
	@status=0; \
	unformatted=$$($(GOFMT) -l $(MODULES) | sort -u); \
	if [ -n "$$unformatted" ]; then echo "gofmt: these files are not formatted:"; echo "$$unformatted"; status=1; fi; \
	for m in $(MODULES); do \
		echo "==================== lint $$m ===================="; \
		if ! { $(load_module); }; then status=1; continue; fi; \
		if [ -z "$$pkgs" ]; then echo "(no Go packages yet: skipped)"; continue; fi; \
		(cd $$m && $(GO) vet ./...) || status=1; \
		(cd $$m && $(GOLANGCI_LINT) run ./...) || status=1; \
	done; \
	echo "==================== actionlint .github/workflows ===================="; \
	$(ACTIONLINT) || status=1; \
	echo "==================== tidy-check ===================="; \
	$(MAKE) --no-print-directory tidy-check || status=1; \
	exit $$status

tidy-check: ## fail when go mod tidy would change a module (tools resolves its siblings through a proxy of the tree)
	@$(RELEASE) tidy -check

# lint-tool installs golangci-lint $(GOLANGCI_LINT_VERSION) into ./bin
# unless that version is already there.
lint-tool:
	@if [ "$$($(GOLANGCI_LINT) version --short 2>/dev/null)" != "$(GOLANGCI_LINT_VERSION:v%=%)" ]; then \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(BIN)"; \
		GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi
	@if [ "$$($(ACTIONLINT) -version 2>/dev/null | head -n 1)" != "$(ACTIONLINT_VERSION)" ]; then \
		echo "installing actionlint $(ACTIONLINT_VERSION) into $(BIN)"; \
		GOBIN=$(BIN) $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION); \
	fi

vuln: ## govulncheck on every module (needs the Go vulnerability database online)
	@GOBIN=$(BIN) $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	@status=0; for m in $(MODULES); do echo "govulncheck $$m"; (cd $$m && $(BIN)/govulncheck ./...) || status=1; done; exit $$status

tidy: ## go mod tidy in every module (tools resolves its siblings through a proxy of the tree)
	@$(RELEASE) tidy

release-check: ## the checks of a release at the version the go.mod files name (see CONTRIBUTING.md)
	@$(RELEASE) -check

# The robustness suite (tools/chaos) runs its own private servers; the
# test servers are started for their packages and SIMBA_TEST_* variables.
# make test runs the same CI profile as the go test of the tools/chaos module.
chaos: ## robustness suite, CI profile: >= 500 handovers per backend under faults, the broken-build self-test, short topology runs
	@$(TESTENV)/with-servers bash -c 'cd tools/chaos && $(GO) test -count=1 -v -timeout 30m ./internal/suite'

soak: ## robustness suite, soak profile: >= 10,000 handovers per backend; writes docs/reliability.md and its plot
	@$(TESTENV)/with-servers bash -c 'cd tools/chaos && $(GO) run ./cmd/chaos -profile soak \
		-report ../../docs/reliability.md -svg ../../docs/reliability-failover.svg'

# TOPOLOGIES=redis-single,zk-ensemble narrows make topology (default: every registered topology).
topology: ## robustness suite on the replicated topologies: >= 20 injections of each fault per topology; writes their tables in docs/reliability.md
	@$(TESTENV)/with-servers bash -c 'cd tools/chaos && $(GO) run ./cmd/chaos -profile topology \
		$(if $(TOPOLOGIES),-topology $(TOPOLOGIES)) -report ../../docs/reliability.md'

servers-up: ## start the test servers and print their export lines
	@$(TESTENV)/up

servers-down: ## stop the test servers and delete their state
	@$(TESTENV)/down
