SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := all
MAKEFLAGS += --no-builtin-rules
.SUFFIXES:

# ---------------------------------------------------------------------------
# Pins. Each tool is also pinned in its wrapper module under hack/tools/; the
# build fails if the two disagree. To bump one, change the variable here and
# the wrapper's go.mod/go.sum (for Kubernetes also the staging replaces).
# ---------------------------------------------------------------------------
KUBE_VERSION        ?= v1.34.4
ETCD_VERSION        ?= v3.6.5
KWOK_VERSION        ?= v0.8.0
STATICCHECK_VERSION ?= v0.8.2

GO        ?= go
BIN_DIR   := $(CURDIR)/bin
TOOLS_DIR := $(CURDIR)/hack/tools

# Flags for building the tools. -buildvcs=false: the wrapper modules live in
# this repository, whose VCS state must not end up in (or break) the builds.
TOOLS_GOFLAGS := -trimpath -buildvcs=false

GO_TEST_FLAGS ?= -count=1 -timeout=45m

# ---------------------------------------------------------------------------
# Main targets
# ---------------------------------------------------------------------------
.PHONY: all
all: lint test

# Root module tests; envtest (pkg/testenv) uses the control plane in bin/.
.PHONY: test
test: tools
	KUBEBUILDER_ASSETS=$(BIN_DIR) KUBE_VERSION=$(KUBE_VERSION) \
		$(GO) test $(GO_TEST_FLAGS) ./...

# gofmt (fails if any file is listed), go vet and staticcheck.
.PHONY: lint
lint: staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard -- '*.go')); \
	if [[ -n "$$unformatted" ]]; then \
		echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) vet ./...
	$(BIN_DIR)/staticcheck ./...

.PHONY: build
build: $(BIN_DIR)/machine-api-provider

# Always handed to go build, which knows best whether anything changed.
.PHONY: $(BIN_DIR)/machine-api-provider
$(BIN_DIR)/machine-api-provider:
	$(GO) build -o $@ ./cmd/machine-api-provider

# The official cloudscale.ch SDK's own integration tests against the emulator
# (test/conformance lists which of them must pass, and why the others can't).
.PHONY: test-conformance
test-conformance:
	$(GO) test -count=1 -timeout=30m -v -run TestCloudscaleSDKIntegrationSuite ./test/conformance/

# 100 Machines through one MachineSet, 0 -> 100 -> 0, against the emulator
# with 300 ms create latency; prints times, cloud calls and peak memory.
.PHONY: bench
bench: tools build
	KUBEBUILDER_ASSETS=$(BIN_DIR) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/

# Unit and envtest tests only, without the SDK suite: seconds, not minutes.
.PHONY: test-short
test-short: tools
	KUBEBUILDER_ASSETS=$(BIN_DIR) KUBE_VERSION=$(KUBE_VERSION) \
		$(GO) test -short $(GO_TEST_FLAGS) ./...

# The emulator in the foreground, for development: export the URL it prints.
EMULATOR_LISTEN ?= 127.0.0.1:8282
EMULATOR_FLAGS  ?= --boot-time 3s
.PHONY: emulator
emulator: build
	$(BIN_DIR)/machine-api-provider emulator cloudscale --listen $(EMULATOR_LISTEN) $(EMULATOR_FLAGS)

# Until the autoscaling demo lands (the local control plane, the manager and
# the cluster-autoscaler), the demo is the product's embedded default cloud.
.PHONY: demo
demo: build
	@echo "make demo: the full autoscaling demo is not built yet; starting the cloudscale.ch emulator,"
	@echo "the cloud every part of this project runs on by default. Try, in another shell:"
	@echo "  curl -s -H 'Authorization: Bearer demo' http://$(EMULATOR_LISTEN)/v1/flavors"
	@echo "Ctrl-C stops it."
	$(BIN_DIR)/machine-api-provider emulator cloudscale --listen $(EMULATOR_LISTEN) $(EMULATOR_FLAGS)

.PHONY: clean
clean:
	rm -rf $(BIN_DIR)

# ---------------------------------------------------------------------------
# Tools, built from the pinned wrapper modules in hack/tools/ into bin/.
#
# Each binary depends on a version stamp (bin/.<tool>-<version>.stamp) and on
# its wrapper's go.mod/go.sum, so it is rebuilt only when its pin changes (or
# it is missing); a warm `make tools` runs no recipe at all.
# ---------------------------------------------------------------------------
KUBE_BINS   := $(addprefix $(BIN_DIR)/,kube-apiserver kube-controller-manager kube-scheduler)
ETCD_BIN    := $(BIN_DIR)/etcd
KWOK_BIN    := $(BIN_DIR)/kwok
LINT_BINS   := $(BIN_DIR)/staticcheck

.PHONY: tools kube etcd kwok staticcheck
tools: kube etcd kwok staticcheck
kube: $(KUBE_BINS)
etcd: $(ETCD_BIN)
kwok: $(KWOK_BIN)
staticcheck: $(LINT_BINS)

# $(call check-pin,<wrapper dir>,<module>,<version>): fail if the wrapper
# module does not require <module> at <version>.
define check-pin
	@got=$$(cd $(1) && $(GO) list -m -f '{{.Version}}' $(2)); \
	if [[ "$$got" != "$(3)" ]]; then \
		echo "error: $(1)/go.mod pins $(2) $$got but the Makefile wants $(3);" \
			"update the wrapper module (cd $(1) && go get $(2)@$(3) && go mod tidy)." >&2; \
		exit 1; \
	fi
endef

# bin/.<tool>-<version>.stamp. Stale stamps of other versions are harmless:
# switching back to an older pin also changes the wrapper's go.mod.
$(BIN_DIR)/.%.stamp:
	@mkdir -p $(@D)
	@touch $@

# Kubernetes: one `go build` for all three binaries so they share the compile.
# The version variables mirror hack/lib/version.sh upstream; buildDate is the
# release tag's time from the module proxy, so builds are reproducible.
KUBE_MAJOR := $(word 1,$(subst ., ,$(KUBE_VERSION:v%=%)))
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION:v%=%)))
KUBE_VERSION_VARS = gitVersion=$(KUBE_VERSION) gitMajor=$(KUBE_MAJOR) gitMinor=$(KUBE_MINOR) \
	gitCommit=0000000000000000000000000000000000000000 gitTreeState=clean buildDate=$$build_date
KUBE_LDFLAGS = $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	$(foreach kv,$(KUBE_VERSION_VARS),-X $(pkg).$(kv)))

$(KUBE_BINS) &: $(BIN_DIR)/.kube-$(KUBE_VERSION).stamp $(TOOLS_DIR)/kubernetes/go.mod $(TOOLS_DIR)/kubernetes/go.sum
	$(call check-pin,$(TOOLS_DIR)/kubernetes,k8s.io/kubernetes,$(KUBE_VERSION))
	cd $(TOOLS_DIR)/kubernetes && \
	build_date=$$($(GO) list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes) && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w $(KUBE_LDFLAGS)" -o $(BIN_DIR)/ \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler
	@touch $(KUBE_BINS)

# etcd: the main package is the root of go.etcd.io/etcd/server/v3.
$(ETCD_BIN): $(BIN_DIR)/.etcd-$(ETCD_VERSION).stamp $(TOOLS_DIR)/etcd/go.mod $(TOOLS_DIR)/etcd/go.sum
	$(call check-pin,$(TOOLS_DIR)/etcd,go.etcd.io/etcd/server/v3,$(ETCD_VERSION))
	cd $(TOOLS_DIR)/etcd && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=none" \
		-o $@ go.etcd.io/etcd/server/v3
	@touch $@

$(KWOK_BIN): $(BIN_DIR)/.kwok-$(KWOK_VERSION).stamp $(TOOLS_DIR)/kwok/go.mod $(TOOLS_DIR)/kwok/go.sum
	$(call check-pin,$(TOOLS_DIR)/kwok,sigs.k8s.io/kwok,$(KWOK_VERSION))
	cd $(TOOLS_DIR)/kwok && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$(KWOK_VERSION)" \
		-o $@ sigs.k8s.io/kwok/cmd/kwok
	@touch $@

$(BIN_DIR)/staticcheck: $(BIN_DIR)/.staticcheck-$(STATICCHECK_VERSION).stamp $(TOOLS_DIR)/lint/go.mod $(TOOLS_DIR)/lint/go.sum
	$(call check-pin,$(TOOLS_DIR)/lint,honnef.co/go/tools,$(STATICCHECK_VERSION))
	cd $(TOOLS_DIR)/lint && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -o $@ honnef.co/go/tools/cmd/staticcheck
	@touch $@
