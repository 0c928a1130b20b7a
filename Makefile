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
KUSTOMIZE_VERSION   ?= v5.8.2
# Served only as pseudo-versions (a commit of kubernetes/autoscaler master).
CLUSTER_AUTOSCALER_VERSION ?= v0.0.0-20250613073258-1959f5f61f6c
# Served only as pseudo-versions (a commit of openshift/cluster-autoscaler-operator master).
CLUSTER_AUTOSCALER_OPERATOR_VERSION ?= v0.0.1-0.20260608074635-5c8643284941

GO        ?= go
BIN_DIR   := $(CURDIR)/bin
TOOLS_DIR := $(CURDIR)/hack/tools
OUTPUT_DIR := $(CURDIR)/_output

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
test: tools test-patches
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
# (test/conformance lists which of them must pass, and why the others can't),
# and the Exoscale suite: every emulated operation through the unmodified
# egoscale v3 client, validated against Exoscale's OpenAPI document (seconds).
.PHONY: test-conformance
test-conformance:
	$(GO) test -count=1 -timeout=30m -v -run 'TestCloudscaleSDKIntegrationSuite|TestExoscaleSDKConformance' ./test/conformance/

# A MachineSet 0 -> N -> 0 through the manager binary against the emulators
# with 300 ms create latency; prints times against the cloud's limit, cloud
# calls per Machine, peak memory (test/bench). BENCH_SIZES (e.g. 100,500,1000),
# CLOUD (one cloud; default both), BENCH_RUNS (repeats, median and range),
# BENCH_CLOUD_LIMIT (qps/burst the emulated API allows before it answers 429).
BENCH_SIZES       ?= 100
BENCH_RUNS        ?= 1
BENCH_CLOUD_LIMIT ?=
comma             := ,
BENCH_CLOUDS       = $(if $(filter command line environment,$(origin CLOUD)),$(CLOUD),cloudscale$(comma)exoscale)
.PHONY: bench
bench: tools build
	BENCH_SIZES=$(BENCH_SIZES) BENCH_RUNS=$(BENCH_RUNS) BENCH_CLOUD_LIMIT=$(BENCH_CLOUD_LIMIT) CLOUD=$(BENCH_CLOUDS) \
		KUBEBUILDER_ASSETS=$(BIN_DIR) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 180m ./test/bench/

# Unit and envtest tests only, without the SDK suite: seconds, not minutes.
.PHONY: test-short
test-short: tools test-patches
	KUBEBUILDER_ASSETS=$(BIN_DIR) KUBE_VERSION=$(KUBE_VERSION) \
		$(GO) test -short $(GO_TEST_FLAGS) ./...

# The emulator in the foreground, for development: export the URL it prints.
EMULATOR_LISTEN ?= 127.0.0.1:8282
EMULATOR_FLAGS  ?= --boot-time 3s
.PHONY: emulator
emulator: build
	$(BIN_DIR)/machine-api-provider emulator cloudscale --listen $(EMULATOR_LISTEN) $(EMULATOR_FLAGS)

# The whole autoscaling loop on this machine, with a live progress view; the
# cluster stays up for exploring until Ctrl-C (bin/machine-api-provider demo --help).
# CLOUD=cloudscale (the default) or CLOUD=exoscale picks the emulated cloud.
CLOUD      ?=
DEMO_FLAGS ?=
.PHONY: demo
demo: tools build
	@echo "make demo: the first run builds the control plane, the cluster-autoscaler and its operator into bin/ (minutes); later runs start at once."
	$(BIN_DIR)/machine-api-provider demo --bin-dir $(BIN_DIR) --cloud $(or $(CLOUD),cloudscale) $(DEMO_FLAGS)

# The same loop, asserted, on every cloud (`make e2e CLOUD=exoscale`: on that
# one only): scale-up from zero and back down to zero Machines, Nodes and
# servers, MachineHealthCheck remediation, Machines and Nodes linked; the
# phase times of each cloud are printed at the end. Only a CLOUD given by the
# user narrows it, never a default set in this file.
E2E_CLOUDS := $(if $(filter command line environment,$(origin CLOUD)),$(CLOUD))
.PHONY: e2e
e2e: tools
	E2E=1 E2E_CLOUDS=$(E2E_CLOUDS) KUBEBUILDER_ASSETS=$(BIN_DIR) $(GO) test -count=1 -v -timeout 30m ./test/e2e/

# Chaos (test/chaos): two replicas of the manager binary with leader election
# against each cloud's emulator, which fails a fifth of the requests (5xx, 429
# with Retry-After, resets, lost answers) and makes bursts of creates slower
# than the client waits; the replicas are killed with SIGKILL at random
# moments (mostly the leader), the kube-apiserver is restarted once a cycle,
# Machines are deleted while their creates are in flight, over cycles of
# 0 -> N -> 0. A table per cloud; it fails on any duplicate, orphan, leaked
# anti-affinity group or stuck Machine, and keeps the logs of every process.
# `make chaos` is the short seeded run CI can afford; `make chaos-long` the
# long one with a new seed each run. CHAOS_SEED (a number, or random),
# CHAOS_CYCLES, CHAOS_MACHINES and CLOUD (one cloud; default both) tune
# either; test/chaos/config.go lists the finer knobs (CHAOS_KILL_EVERY, ...).
CHAOS_SEED     ?= 1
CHAOS_CYCLES   ?= 2
CHAOS_MACHINES ?= 8
CHAOS_TIMEOUT  ?= 120m
CHAOS_CLOUDS    = $(if $(filter command line environment,$(origin CLOUD)),$(CLOUD))
.PHONY: chaos chaos-long
chaos: tools build
	CHAOS=1 CLOUD=$(CHAOS_CLOUDS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_CYCLES=$(CHAOS_CYCLES) CHAOS_MACHINES=$(CHAOS_MACHINES) \
		KUBEBUILDER_ASSETS=$(BIN_DIR) $(GO) test -count=1 -v -timeout $(CHAOS_TIMEOUT) -run '^TestChaos$$' ./test/chaos/
chaos-long: CHAOS_SEED = random
chaos-long: CHAOS_CYCLES = 3
chaos-long: CHAOS_MACHINES = 50
chaos-long: CHAOS_TIMEOUT = 300m
chaos-long: chaos

.PHONY: clean
clean:
	rm -rf $(BIN_DIR) $(OUTPUT_DIR)

# ---------------------------------------------------------------------------
# Deployment: CRDs, manifests and the container image (config/, Dockerfile).
# ---------------------------------------------------------------------------
# The machine.openshift.io CRDs in config/crd/ are copies of the openshift/api
# module's, at the version in go.mod. Never edit them; after bumping
# openshift/api run this (test/manifests fails until you do).
MACHINE_API_CRDS := 0000_10_machine-api_01_machines-Default.crd.yaml \
	0000_10_machine-api_01_machinesets-Default.crd.yaml \
	0000_10_machine-api_01_machinehealthchecks.crd.yaml
.PHONY: sync-crds
sync-crds:
	@$(GO) mod download github.com/openshift/api
	@src=$$($(GO) list -m -f '{{.Dir}}' github.com/openshift/api)/machine/v1beta1/zz_generated.crd-manifests; \
	for f in $(MACHINE_API_CRDS); do install -m 0644 "$$src/$$f" config/crd/$$f; done; \
	echo "config/crd: synced from $$($(GO) list -m github.com/openshift/api)"

# Render every kustomization meant to be applied into _output/<name>.yaml.
MANIFESTS := default overlays/cloudscale overlays/exoscale
.PHONY: manifests
manifests: $(KUSTOMIZE)
	@mkdir -p $(OUTPUT_DIR)
	@for k in $(MANIFESTS); do \
		out=$(OUTPUT_DIR)/$$(echo $$k | tr / -).yaml; \
		$(KUSTOMIZE) build config/$$k > $$out; echo "$$out"; \
	done

# The image as an OCI image layout tarball, built without a container engine
# or registry (hack/image): the static binary on an empty base with a nonroot
# user (65532), CA certificates and /tmp. Every timestamp is the last commit's
# time, so two builds of one commit give the same digest. Load it with
# `docker load -i`, `podman load -i`, `kind load image-archive` or push it
# with `skopeo copy oci-archive:$(IMAGE_TAR) docker://<registry>/<name>:<tag>`.
# The Dockerfile builds the same for those with Docker.
IMAGE             ?= machine-api-provider:latest
IMAGE_ARCH        ?= $(shell $(GO) env GOARCH)
IMAGE_TAR         := $(OUTPUT_DIR)/machine-api-provider.oci.tar
IMAGE_BIN         := $(OUTPUT_DIR)/image/$(IMAGE_ARCH)/machine-api-provider
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct)
IMAGE_LDFLAGS     := -s -w -buildid=
.PHONY: image
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) \
		$(GO) build -trimpath -buildvcs=false -ldflags '$(IMAGE_LDFLAGS)' -o $(IMAGE_BIN) ./cmd/machine-api-provider
	cd hack/image && GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) run . \
		--binary $(IMAGE_BIN) --arch $(IMAGE_ARCH) --name $(IMAGE) \
		--source-date-epoch $(SOURCE_DATE_EPOCH) --revision $$(git rev-parse HEAD) \
		--output $(IMAGE_TAR) --digest-file $(IMAGE_TAR).digest

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
KWOK_STAGES := $(BIN_DIR)/kwok-stages.yaml
LINT_BINS   := $(BIN_DIR)/staticcheck
CLUSTER_AUTOSCALER_BIN := $(BIN_DIR)/cluster-autoscaler
CLUSTER_AUTOSCALER_OPERATOR_BIN := $(BIN_DIR)/cluster-autoscaler-operator
CLUSTER_AUTOSCALER_OPERATOR_MANIFESTS := $(BIN_DIR)/cluster-autoscaler-operator-manifests
KUSTOMIZE   := $(BIN_DIR)/kustomize

.PHONY: tools kube etcd kwok staticcheck kustomize cluster-autoscaler cluster-autoscaler-operator
tools: kube etcd kwok staticcheck kustomize cluster-autoscaler cluster-autoscaler-operator
kube: $(KUBE_BINS)
etcd: $(ETCD_BIN)
kwok: $(KWOK_BIN) $(KWOK_STAGES)
staticcheck: $(LINT_BINS)
cluster-autoscaler: $(CLUSTER_AUTOSCALER_BIN)
cluster-autoscaler-operator: $(CLUSTER_AUTOSCALER_OPERATOR_BIN)
kustomize: $(KUSTOMIZE)

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

# kustomize: the version comes from the module's build info; buildDate is the
# release tag's time from the module proxy, as for Kubernetes.
$(KUSTOMIZE): $(BIN_DIR)/.kustomize-$(KUSTOMIZE_VERSION).stamp $(TOOLS_DIR)/kustomize/go.mod $(TOOLS_DIR)/kustomize/go.sum
	$(call check-pin,$(TOOLS_DIR)/kustomize,sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))
	cd $(TOOLS_DIR)/kustomize && \
	build_date=$$($(GO) list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' sigs.k8s.io/kustomize/kustomize/v5) && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w -X sigs.k8s.io/kustomize/api/provenance.buildDate=$$build_date" \
		-o $@ sigs.k8s.io/kustomize/kustomize/v5
	@touch $@

# kwok simulates nothing without stages: write kwok's own (node ready and
# heartbeat, pod ready, complete, delete) from its module, for --config.
$(KWOK_STAGES): $(BIN_DIR)/.kwok-$(KWOK_VERSION).stamp $(TOOLS_DIR)/kwok/go.mod $(TOOLS_DIR)/kwok/go.sum $(TOOLS_DIR)/kwok/stages/main.go
	cd $(TOOLS_DIR)/kwok && GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) run ./stages $@

# cluster-autoscaler: upstream's autoscaler packages behind the thin main in
# hack/tools/cluster-autoscaler (README.md there says why upstream's main
# package cannot be built, and what is left out). -tags clusterapi compiles in
# the Cluster API provider only. k8s.io/autoscaler publishes no tags for this
# module, only pseudo-versions, which are missing from the checksum database:
# GONOSUMDB lets the go command fetch them (go.sum still pins their hashes);
# it is exported for this target's recipe only. There is no version variable
# to set: upstream's version.ClusterAutoscalerVersion is a constant.
#
# The pinned version is built with our patches (hack/tools/cluster-autoscaler/
# patches/*.patch, in name order): the recipe copies the pinned module out of
# the module cache into $(CLUSTER_AUTOSCALER_BUILD)/src, applies each patch
# there with `git apply` (no fuzz: every context line must match; all hunks or
# none), and builds the wrapper against the copy through a generated go.mod
# (the wrapper's, plus a replace to the copy), so the go.mod in git stays the
# plain pin. A patch that no longer applies fails the build and says what to
# do. The stamp's name carries a checksum of the patches, so changing, adding or
# removing one rebuilds, as a new pin does.
#
# Static (CGO_ENABLED=0, as upstream builds its image): the demo runs it as
# the container of the Deployment the cluster-autoscaler-operator renders,
# in a root of its own that has no libraries (pkg/localcluster). "static" is
# in the stamp's name so that an older dynamic build is replaced.
CLUSTER_AUTOSCALER_MODULE  := k8s.io/autoscaler/cluster-autoscaler
CLUSTER_AUTOSCALER_PATCHES := $(sort $(wildcard $(TOOLS_DIR)/cluster-autoscaler/patches/*.patch))
CLUSTER_AUTOSCALER_PATCH_HASH := $(if $(CLUSTER_AUTOSCALER_PATCHES),$(shell cat $(CLUSTER_AUTOSCALER_PATCHES) | cksum | cut -d' ' -f1),unpatched)
CLUSTER_AUTOSCALER_BUILD   := $(BIN_DIR)/cluster-autoscaler-build

$(CLUSTER_AUTOSCALER_BIN): export GONOSUMDB := k8s.io/autoscaler
$(CLUSTER_AUTOSCALER_BIN): $(BIN_DIR)/.cluster-autoscaler-$(CLUSTER_AUTOSCALER_VERSION)-$(CLUSTER_AUTOSCALER_PATCH_HASH)-static.stamp \
		$(TOOLS_DIR)/cluster-autoscaler/go.mod $(TOOLS_DIR)/cluster-autoscaler/go.sum \
		$(TOOLS_DIR)/cluster-autoscaler/main.go $(CLUSTER_AUTOSCALER_PATCHES)
	$(call check-pin,$(TOOLS_DIR)/cluster-autoscaler,$(CLUSTER_AUTOSCALER_MODULE),$(CLUSTER_AUTOSCALER_VERSION))
	@cd $(TOOLS_DIR)/cluster-autoscaler && \
	$(GO) mod download $(CLUSTER_AUTOSCALER_MODULE) && \
	pinned=$$($(GO) list -m -f '{{.Dir}}' $(CLUSTER_AUTOSCALER_MODULE)) && \
	build=$(CLUSTER_AUTOSCALER_BUILD) && \
	rm -rf $$build && mkdir -p $$build && \
	cp -R $$pinned $$build/src && chmod -R u+w $$build/src && \
	for p in $(CLUSTER_AUTOSCALER_PATCHES); do \
		echo "cluster-autoscaler: applying $${p#$(CURDIR)/}"; \
		if ! (cd $$build/src && git apply --verbose $$p); then \
			echo "error: $${p#$(CURDIR)/} does not apply to $(CLUSTER_AUTOSCALER_MODULE) $(CLUSTER_AUTOSCALER_VERSION)." >&2; \
			echo "  If this version already has the fix the patch carries (its header says which upstream change), delete the patch;" >&2; \
			echo "  otherwise rewrite it against this version. hack/tools/cluster-autoscaler/README.md says how." >&2; \
			exit 1; \
		fi; \
	done && \
	cp go.mod $$build/go.mod && cp go.sum $$build/go.sum && \
	$(GO) mod edit -replace=$(CLUSTER_AUTOSCALER_MODULE)=$$build/src $$build/go.mod && \
	echo "cluster-autoscaler: go build against $${build#$(CURDIR)/}/src" && \
	CGO_ENABLED=0 GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -modfile=$$build/go.mod -tags clusterapi -ldflags "-s -w" -o $@ .
	@touch $@

# cluster-autoscaler-operator: OpenShift's operator that turns a
# ClusterAutoscaler into the cluster-autoscaler's Deployment and
# MachineAutoscalers into MachineSet annotations; the demo and `make e2e`
# configure autoscaling through it (pkg/demo/autoscaling.go). Its main
# package is cmd/manager, built from the module as pinned; the wrapper's
# go.mod says why it needs one replace. Beside the binary, the recipe copies
# the pinned module's install/ manifests (CRDs, RBAC, the operator's own
# Deployment and Service) and image-references (which image is which
# binary), which the demo applies as the cluster-version operator would, and
# the two monitoring.coreos.com CRDs the operator writes to (ServiceMonitor,
# PrometheusRule), from the prometheus-operator module of the version the
# operator's go.mod uses: one pin for all three. Static (CGO_ENABLED=0), as
# in its image: it runs as a pod's container (pkg/localcluster).
CLUSTER_AUTOSCALER_OPERATOR_MODULE := github.com/openshift/cluster-autoscaler-operator
PROMETHEUS_OPERATOR_MODULE         := github.com/prometheus-operator/prometheus-operator
$(CLUSTER_AUTOSCALER_OPERATOR_BIN): $(BIN_DIR)/.cluster-autoscaler-operator-$(CLUSTER_AUTOSCALER_OPERATOR_VERSION).stamp \
		$(TOOLS_DIR)/cluster-autoscaler-operator/go.mod $(TOOLS_DIR)/cluster-autoscaler-operator/go.sum
	$(call check-pin,$(TOOLS_DIR)/cluster-autoscaler-operator,$(CLUSTER_AUTOSCALER_OPERATOR_MODULE),$(CLUSTER_AUTOSCALER_OPERATOR_VERSION))
	@cd $(TOOLS_DIR)/cluster-autoscaler-operator && \
	$(GO) mod download $(CLUSTER_AUTOSCALER_OPERATOR_MODULE) && \
	src=$$($(GO) list -m -f '{{.Dir}}' $(CLUSTER_AUTOSCALER_OPERATOR_MODULE)) && \
	prom=$$($(GO) list -m -f '{{.Version}}' $(PROMETHEUS_OPERATOR_MODULE)/pkg/apis/monitoring) && \
	promdir=$$(cd / && $(GO) mod download -json $(PROMETHEUS_OPERATOR_MODULE)@$$prom | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p') && \
	test -n "$$promdir" && \
	out=$(CLUSTER_AUTOSCALER_OPERATOR_MANIFESTS) && rm -rf $$out && mkdir -p $$out/monitoring && \
	install -m 0644 $$src/install/*.yaml $$src/install/image-references $$out/ && \
	install -m 0644 $$promdir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml \
		$$promdir/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml $$out/monitoring/ && \
	echo "cluster-autoscaler-operator: manifests of $(CLUSTER_AUTOSCALER_OPERATOR_VERSION) and prometheus-operator $$prom in $${out#$(CURDIR)/}" && \
	CGO_ENABLED=0 GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build \
		-ldflags "-s -w -X $(CLUSTER_AUTOSCALER_OPERATOR_MODULE)/pkg/version.Raw=$(CLUSTER_AUTOSCALER_OPERATOR_VERSION)" \
		-o $@ $(CLUSTER_AUTOSCALER_OPERATOR_MODULE)/cmd/manager
	@touch $@

# The patches apply exactly (no fuzz, no offset) to the pinned version in the
# module cache and touch only the files they may: a plain go test of the
# wrapper module, seconds; part of `make test`.
.PHONY: test-patches
test-patches: export GONOSUMDB := k8s.io/autoscaler
test-patches:
	cd $(TOOLS_DIR)/cluster-autoscaler && $(GO) test -count=1 ./patches/
