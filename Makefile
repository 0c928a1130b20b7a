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
# promtool of Prometheus 3.16.0 (the Go module's version), for the alerting
# rules' unit tests (config/prometheus, test/manifests).
PROMTOOL_VERSION    ?= v0.316.0
# The oldest kustomize an OpenShift 4.14+ `oc apply -k` embeds (kubectl 1.27's;
# 4.15-4.17 embed v5.0.4, which the module proxy does not serve): every
# kustomization must render with it (test/manifests).
KUSTOMIZE_OC_VERSION ?= v5.0.1
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
# Served only as pseudo-versions (a commit of kubernetes/autoscaler master).
CLUSTER_AUTOSCALER_VERSION ?= v0.0.0-20250613073258-1959f5f61f6c
# The machine-api-operator's controllers of the OpenShift eras `make matrix`
# runs (hack/tools/mao/mao-<era>.mod): the 4.16 and 4.18 lines (the versions
# openshift/machine-api-provider-aws pins on release-4.16 and release-4.18)
# and the version go.mod pins (4.21). pkg/controllers/deployer/releases.go
# names the same (Matrix); test/matrix fails when they differ.
MAO_4_16_VERSION ?= v0.2.1-0.20240125175440-c9de8bda0dd1
MAO_4_18_VERSION ?= v0.2.1-0.20240924110326-1efafa4a6615
MAO_4_21_VERSION ?= v0.2.1-0.20251115003740-026e9dff6a1c
MATRIX_ERAS      ?= 4.16 4.18 4.21
# Served only as pseudo-versions (a commit of openshift/cluster-autoscaler-operator master).
CLUSTER_AUTOSCALER_OPERATOR_VERSION ?= v0.0.1-0.20260608074635-5c8643284941

GO        ?= go
BIN_DIR   := $(CURDIR)/bin
TOOLS_DIR := $(CURDIR)/hack/tools
OUTPUT_DIR := $(CURDIR)/_output

# Flags for building the tools. -buildvcs=false: the wrapper modules live in
# this repository, whose VCS state must not end up in (or break) the builds.
TOOLS_GOFLAGS := -trimpath -buildvcs=false

# Every build of this module (the tests, go vet, staticcheck, the provider,
# the local CCM, the images) is static and path-trimmed, as the images and
# the pod runner's binaries must be: the ~1,400 packages they share are then
# compiled once, not once per variant (cgo on or off, paths trimmed or not
# each make a build of their own), which a cold CI run pays on 2 cores.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(filter-out -trimpath,$(GOFLAGS))

GO_TEST_FLAGS ?= -count=1 -timeout=45m

# ---------------------------------------------------------------------------
# Main targets
# ---------------------------------------------------------------------------
.PHONY: all
all: lint test

# Root module tests; envtest (pkg/testenv) uses the control plane in bin/.
# pkg/actuator's integration tests (each on a control plane of its own,
# mostly waiting) took as long as all other packages together: its test
# binary runs as two processes, half of the tests each (ACTUATOR_HALF),
# beside the other packages (hack/test-halves.sh).
ACTUATOR_HALF      ?= ^Test[A-La-l]
ACTUATOR_TEST_FLAGS = -test.count=1 -test.timeout=45m
.PHONY: test
test: tools test-patches test-hack
	$(GO) test -c -o $(OUTPUT_DIR)/actuator.test ./pkg/actuator
	export KUBEBUILDER_ASSETS=$(BIN_DIR) KUBE_VERSION=$(KUBE_VERSION); \
	hack/test-halves.sh $(OUTPUT_DIR)/actuator.test pkg/actuator '$(ACTUATOR_HALF)' $(ACTUATOR_TEST_FLAGS) & halves=$$!; \
	rc=0; $(GO) test $(GO_TEST_FLAGS) $$($(GO) list ./... | grep -v '/pkg/actuator$$') || rc=1; \
	wait $$halves || rc=1; exit $$rc

# The modules of hack/ that are part of a release: the image builder and the
# release tool (the OLM bundle, validated with operator-framework/api's
# validators, the catalog, the pin, the notes). Seconds.
.PHONY: test-hack
test-hack: $(KUSTOMIZE)
	cd hack/image && $(GO) test -count=1 ./...
	cd hack/release && $(GO) test -count=1 ./...

# gofmt (fails if any file is listed), go vet and staticcheck.
.PHONY: lint
# go mod download first, quietly: go vet would print each module it
# fetches (go: downloading ...) among its findings.
lint: staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard -- '*.go')); \
	if [[ -n "$$unformatted" ]]; then \
		echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) mod download
	$(GO) vet ./...
	$(BIN_DIR)/staticcheck ./...
	for m in hack/image hack/release; do (cd $$m && $(GO) mod download && $(GO) vet ./... && $(BIN_DIR)/staticcheck ./...) || exit 1; done

.PHONY: build
build: $(BIN_DIR)/machine-api-provider

# Always handed to go build, which knows best whether anything changed.
.PHONY: $(BIN_DIR)/machine-api-provider
$(BIN_DIR)/machine-api-provider:
	$(GO) build -o $@ ./cmd/machine-api-provider

# The local control plane's cloud-controller-manager (pkg/localcluster/ccm):
# k8s.io/cloud-provider's Node controllers with each vendor's rules, which
# make demo, make e2e and make matrix run on platform External. A binary of
# its own, so that the provider's carries none of k8s.io/cloud-provider.
LOCAL_CCM := $(BIN_DIR)/cloud-controller-manager
.PHONY: $(LOCAL_CCM)
$(LOCAL_CCM):
	CGO_ENABLED=0 $(GO) build -o $@ ./pkg/localcluster/ccm/cloud-controller-manager

# The official cloudscale.ch SDK's own integration tests against the emulator
# (test/conformance lists which of them must pass, and why the others can't),
# and the Exoscale suite: every emulated operation through the unmodified
# egoscale v3 client, validated against Exoscale's OpenAPI document (seconds).
.PHONY: test-conformance
test-conformance:
	$(GO) test -count=1 -timeout=30m -v -run 'TestCloudscaleSDKIntegrationSuite|TestExoscaleSDKConformance' ./test/conformance/

# A MachineSet 0 -> N -> 0 through the manager binary against the emulators
# with 300 ms create latency; prints times against the cloud's limit, cloud
# calls per Machine by route and purpose (ownership reads apart), the steady
# state's calls and a resync's, the manager's CPU-seconds and peak memory
# (test/bench), and a leader change. BENCH_SIZES (e.g. 100,500,1000), CLOUD
# (one cloud; default both), BENCH_RUNS (repeats, each printed),
# BENCH_CLOUD_LIMIT (qps/burst the emulated API allows before it answers 429),
# BENCH_CLOUD_API_QPS (the manager's --cloud-api-qps; default its own, 50).
# BenchmarkBootImageImport prints a release's boot image import per image and
# zone (cloud calls, wall time); BENCH_IMAGE_MIB sizes its images (64).
BENCH_SIZES       ?= 100
BENCH_RUNS        ?= 1
BENCH_CLOUD_LIMIT ?=
BENCH_CLOUD_API_QPS ?=
comma             := ,
empty             :=
space             := $(empty) $(empty)
BENCH_CLOUDS       = $(if $(filter command line environment,$(origin CLOUD)),$(CLOUD),cloudscale$(comma)exoscale)
BENCH_ENV          = BENCH_RUNS=$(BENCH_RUNS) CLOUD=$(BENCH_CLOUDS) KUBEBUILDER_ASSETS=$(BIN_DIR)
.PHONY: bench
bench: tools build
	BENCH_SIZES=$(BENCH_SIZES) BENCH_CLOUD_LIMIT=$(BENCH_CLOUD_LIMIT) BENCH_CLOUD_API_QPS=$(BENCH_CLOUD_API_QPS) $(BENCH_ENV) \
		$(GO) test -run '^$$' -bench 'BenchmarkScale$$|BenchmarkLeaderChange$$' -benchtime 1x -timeout 180m ./test/bench/

# N clusters of FLEET_MACHINES Machines in one cloud account, a manager each
# (FLEET_CLUSTERS, default 1,5,20): the calls per minute the account sees in
# steady state and while one cluster scales up, per cluster and in total,
# against the clouds' documented rate limits. CLOUD and BENCH_RUNS as above.
FLEET_CLUSTERS ?= 1,5,20
FLEET_MACHINES ?= 50
.PHONY: bench-fleet
bench-fleet: tools build
	FLEET_CLUSTERS=$(FLEET_CLUSTERS) FLEET_MACHINES=$(FLEET_MACHINES) $(BENCH_ENV) \
		$(GO) test -run '^$$' -bench 'BenchmarkFleet$$' -benchtime 1x -timeout 180m ./test/bench/

# docs/benchmarks.md: both benchmarks at 100 and 1000 Machines and 1, 5, 20
# clusters, twice each, on this machine as it is, then the page from their
# sections (BENCH_DOCS_DIR). BENCH_DOCS_RUN=0 writes the page from the
# sections of an earlier run; a notes.md beside them, if any, ends the page
# (say there how the run differed from this target's; a full run removes it).
BENCH_DOCS_DIR ?= $(OUTPUT_DIR)/bench
BENCH_DOCS_RUN ?= 1
.PHONY: bench-docs
bench-docs: tools build
	mkdir -p $(BENCH_DOCS_DIR)
	if [[ "$(BENCH_DOCS_RUN)" != 0 ]]; then \
		rm -f $(BENCH_DOCS_DIR)/notes.md; \
		BENCH_DOCS_DIR=$(BENCH_DOCS_DIR) BENCH_SIZES=100,1000 BENCH_RUNS=2 CLOUD=$(BENCH_CLOUDS) KUBEBUILDER_ASSETS=$(BIN_DIR) \
			$(GO) test -run '^$$' -bench 'BenchmarkScale$$' -benchtime 1x -timeout 300m ./test/bench/ | tee $(BENCH_DOCS_DIR)/scale.log; \
		BENCH_DOCS_DIR=$(BENCH_DOCS_DIR) FLEET_CLUSTERS=1,5,20 FLEET_MACHINES=50 BENCH_RUNS=2 CLOUD=$(BENCH_CLOUDS) KUBEBUILDER_ASSETS=$(BIN_DIR) \
			$(GO) test -run '^$$' -bench 'BenchmarkFleet$$' -benchtime 1x -timeout 300m ./test/bench/ | tee $(BENCH_DOCS_DIR)/fleet.log; \
	fi
	BENCH_DOCS_DIR=$(BENCH_DOCS_DIR) BENCH_DOCS_WRITE=1 $(GO) test -count=1 -run '^TestBenchmarksPage$$' ./test/bench/

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
# The local control plane is Linux's (its pods are chrooted: root, or an
# unprivileged user namespace): hack/demo-preflight.sh says within a second,
# before any tool is built, whether this machine can run it and what to do
# instead. Elsewhere (macOS) with Docker or Podman, make demo runs the demo's
# container image (make demo-container).
CLOUD      ?=
DEMO_FLAGS ?=
.PHONY: demo demo-here
demo:
	@rc=0; hack/demo-preflight.sh || rc=$$?; \
	case $$rc in \
	0) $(MAKE) --no-print-directory demo-here ;; \
	2) $(MAKE) --no-print-directory demo-container ;; \
	*) exit 1 ;; \
	esac

demo-here: tools build $(LOCAL_CCM)
	@echo "make demo: the first run builds the control plane, the cluster-autoscaler and its operator into bin/ (about 15 minutes on 2 cores); later runs start at once."
	$(BIN_DIR)/machine-api-provider demo --bin-dir $(BIN_DIR) --cloud $(or $(CLOUD),cloudscale) $(DEMO_FLAGS)

# The demo in a container, for machines that cannot run the local control
# plane themselves (macOS; Linux without root or user namespaces): its
# image, built like the provider's (hack/image, no container engine), holds
# the tools of make tools for linux/DEMO_IMAGE_ARCH (static), the openshift/api
# CRDs, and the provider's static binary as the entrypoint (demo --keep=false).
# It runs as root with --privileged (the pods are chrooted into network
# namespaces of their own). On a Linux machine of that architecture the tools
# are bin/'s; otherwise (macOS, or DEMO_IMAGE_ARCH=arm64 on amd64) make
# cross-builds them once into _output/demo-image/linux-<arch>/bin (as long as
# make tools). test/demoimage (make e2e) runs the image's entrypoint as its
# config says, chrooted into its unpacked layers.
DEMO_IMAGE      ?= machine-api-provider-demo:latest
DEMO_IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
DEMO_IMAGE_TAR  := $(OUTPUT_DIR)/machine-api-provider-demo.oci.tar
DEMO_IMAGE_BIN  := $(OUTPUT_DIR)/image/$(DEMO_IMAGE_ARCH)/machine-api-provider
GOHOSTOS        := $(shell $(GO) env GOHOSTOS)
GOHOSTARCH      := $(shell $(GO) env GOHOSTARCH)
DEMO_TOOLS_DIR  ?= $(if $(and $(filter linux,$(GOHOSTOS)),$(filter $(DEMO_IMAGE_ARCH),$(GOHOSTARCH))),$(BIN_DIR),$(OUTPUT_DIR)/demo-image/linux-$(DEMO_IMAGE_ARCH)/bin)
# What the demo runs from its --bin-dir (pkg/demo, pkg/localcluster).
DEMO_TOOLS      := etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwok-stages.yaml \
	cluster-autoscaler cluster-autoscaler-operator cluster-autoscaler-operator-manifests cloud-controller-manager
DEMO_ENGINE     ?= $(shell command -v docker >/dev/null 2>&1 && echo docker || { command -v podman >/dev/null 2>&1 && echo podman; })
.PHONY: demo-image demo-tools demo-container
demo-image:
	$(MAKE) --no-print-directory demo-tools BIN_DIR=$(DEMO_TOOLS_DIR) GOOS=linux GOARCH=$(DEMO_IMAGE_ARCH)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(DEMO_IMAGE_ARCH) \
		$(GO) build -trimpath -buildvcs=false -ldflags '$(IMAGE_LDFLAGS)' -o $(DEMO_IMAGE_BIN) ./cmd/machine-api-provider
	api=$$($(GO) list -m -f '{{.Dir}}' github.com/openshift/api) && \
	cd hack/image && GOOS=$(GOHOSTOS) GOARCH=$(GOHOSTARCH) GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) run . \
		--binary $(DEMO_IMAGE_BIN) --arch $(DEMO_IMAGE_ARCH) --name $(DEMO_IMAGE) \
		--demo-tools $(DEMO_TOOLS_DIR) --demo-tool $(subst $(space),$(comma),$(DEMO_TOOLS)) --openshift-api "$$api" \
		--source-date-epoch $(SOURCE_DATE_EPOCH) --revision $(IMAGE_COMMIT) --output $(DEMO_IMAGE_TAR)

# The tools of the demo image, built for GOOS/GOARCH (make demo-image sets
# them and BIN_DIR).
demo-tools: kube etcd kwok cluster-autoscaler cluster-autoscaler-operator $(LOCAL_CCM)

# Loads the demo image into docker or podman and runs it (Ctrl-C stops it).
# The engine must answer before anything is built.
demo-container:
	@if [[ -z "$(DEMO_ENGINE)" ]]; then echo "make demo-container: needs docker or podman (DEMO_ENGINE)" >&2; exit 1; fi
	@if ! $(DEMO_ENGINE) info >/dev/null 2>&1; then echo "make demo-container: $(DEMO_ENGINE) does not answer ($(DEMO_ENGINE) info fails): start its daemon (Docker Desktop, podman machine start)" >&2; exit 1; fi
	@$(MAKE) --no-print-directory demo-image
	$(DEMO_ENGINE) load -i $(DEMO_IMAGE_TAR)
	$(DEMO_ENGINE) run --rm $$([[ -t 0 ]] && echo -it) --privileged $(DEMO_IMAGE) --keep=false --cloud $(or $(CLOUD),cloudscale) $(DEMO_FLAGS)

# The same loop, asserted, on every cloud (`make e2e CLOUD=exoscale`: on that
# one only): scale-up from zero and back down to zero Machines, Nodes and
# servers, MachineHealthCheck remediation, Machines and Nodes linked; the
# phase times of each cloud are printed at the end. Only a CLOUD given by the
# user narrows it, never a default set in this file. Beside it (go test runs
# packages side by side: they mostly wait, and none listens on a fixed
# port), on both clouds: adopting a cluster Terraform made (test/adopt),
# installing a new one with the install-time manifests (test/install), two
# clusters sharing one cloud account (test/twoclusters, about a minute), and
# the demo's container image run as a container engine runs it
# (test/demoimage: make demo-image first, which here packs bin/'s tools).
E2E_CLOUDS := $(if $(filter command line environment,$(origin CLOUD)),$(CLOUD))
.PHONY: e2e
e2e: tools $(LOCAL_CCM) demo-image
	E2E=1 E2E_CLOUDS=$(E2E_CLOUDS) KUBEBUILDER_ASSETS=$(BIN_DIR) $(GO) test -count=1 -v -timeout 30m ./test/e2e/ ./test/adopt/ ./test/install/ ./test/twoclusters/ ./test/demoimage/

# Chaos (test/chaos): two replicas of the manager binary with leader election
# against each cloud's emulator, which fails a fifth of the requests (5xx, 429
# with Retry-After, resets, lost answers) and makes bursts of creates slower
# than the client waits; the replicas are killed with SIGKILL at random
# moments (mostly the leader), the kube-apiserver is restarted once a cycle,
# Machines are deleted while their creates are in flight, over cycles of
# 0 -> N -> 0, the two clouds side by side. A table per cloud; it fails on any duplicate, orphan, leaked
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
# user (65532), CA certificates and /tmp. Every timestamp is the time of
# IMAGE_COMMIT, the last commit that changed anything but the release pin
# (config/image), and the revision label is that commit: two builds of one
# commit give the same digest, and so does a build at a release's tag, whose
# commit only pins the digest of the image built before it. Load it with
# `docker load -i`, `podman load -i`, `kind load image-archive` or push it
# with `skopeo copy oci-archive:$(IMAGE_TAR) docker://<registry>/<name>:<tag>`.
# The Dockerfile builds the same for those with Docker.
IMAGE             ?= machine-api-provider:latest
IMAGE_ARCH        ?= $(shell $(GO) env GOARCH)
IMAGE_TAR         := $(OUTPUT_DIR)/machine-api-provider.oci.tar
IMAGE_BIN         := $(OUTPUT_DIR)/image/$(IMAGE_ARCH)/machine-api-provider
IMAGE_COMMIT      ?= $(shell git log -1 --format=%H -- . ':(exclude)config/image')
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct $(IMAGE_COMMIT))
IMAGE_LDFLAGS     := -s -w -buildid=
.PHONY: image
image: $(IMAGE_BIN)
	cd hack/image && GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) run . \
		--binary $(IMAGE_BIN) --arch $(IMAGE_ARCH) --name $(IMAGE) \
		--source-date-epoch $(SOURCE_DATE_EPOCH) --revision $(IMAGE_COMMIT) \
		--output $(IMAGE_TAR) --digest-file $(IMAGE_TAR).digest

# The image's static binary (also what `make matrix` runs as the provider's
# image). Always handed to go build, which knows whether anything changed.
.PHONY: $(IMAGE_BIN)
$(IMAGE_BIN):
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) \
		$(GO) build -trimpath -buildvcs=false -ldflags '$(IMAGE_LDFLAGS)' -o $(IMAGE_BIN) ./cmd/machine-api-provider

# The Machine API controllers of three OpenShift eras (MATRIX_ERAS: 4.16,
# 4.18, 4.21), each era's own binaries built from its machine-api-operator
# version into bin/mao-<era>/, against a local control plane with that era's
# CRDs and webhooks, on each cloud's emulator (CLOUD: one cloud): the
# install of config/overlays/<cloud> with exactly its RBAC, the deployer's pod
# and then the controllers' pod it renders, each run by the pod runner
# (pkg/localcluster/pod.go) as its service account, the provider being the
# image's static binary. A table of era x cloud x check at the end; it fails
# on any container exit, failed check or request refused by RBAC (test/matrix).
MATRIX_TIMEOUT ?= 90m
MATRIX_CLOUDS   = $(if $(filter command line environment,$(origin CLOUD)),$(CLOUD))
.PHONY: matrix matrix-build
matrix: tools matrix-build $(LOCAL_CCM)
	MATRIX=1 MATRIX_ERAS="$(MATRIX_ERAS)" CLOUD=$(MATRIX_CLOUDS) MATRIX_PROVIDER=$(IMAGE_BIN) \
		KUBEBUILDER_ASSETS=$(BIN_DIR) $(GO) test -count=1 -v -timeout $(MATRIX_TIMEOUT) -run '^TestMatrix$$' ./test/matrix/

# What make matrix runs, built: the eras' controllers and the static
# provider. CI builds them beside the tests, at the lowest priority (.ci/run).
matrix-build: $(foreach e,$(MATRIX_ERAS),mao-$(e)) $(IMAGE_BIN)

# ---------------------------------------------------------------------------
# Releases and the OLM bundle (docs/releasing.md).
#
# `make release VERSION=vX.Y.Z` writes into $(RELEASE_DIR):
#   machine-api-provider.oci.tar(.digest)  the image (make image), and its digest
#   install-<cloud>.yaml                   config/overlays/<cloud> with the image by digest: `oc apply -f`
#   machine-api-provider.cdx.json          the CycloneDX SBOM of the image's binary
#   bundle/, catalog/, catalog.Dockerfile  as make bundle, for this version
#   RELEASE_NOTES.md                       the version's section of CHANGELOG.md, and how to install
#   machine-api-provider-<os>-<arch>       the command-line tool, per RELEASE_PLATFORMS
#   SHA256SUMS
# and pins the image by digest in config/image: commit that file alone and
# tag the commit vX.Y.Z, and `oc apply -k` of an overlay at the tag installs
# exactly this image. It refuses a tree with other changes (the image is the
# commit's; RELEASE_ALLOW_DIRTY=1 overrides) and a VERSION without a section
# in CHANGELOG.md (but a pre-release, e.g. v0.0.0-dev, takes [Unreleased]).
# Nothing is pushed: docs/releasing.md says how (skopeo, oras).
#
# `make bundle` writes the OLM registry+v1 bundle of each cloud
# (machine-api-provider-<cloud>: the CSV and the objects of
# config/overlays/<cloud>, config/olm/<cloud>'s description), builds each
# bundle's image reproducibly as hack/image does, and writes the file-based
# catalog naming those images by digest, into $(OLM_DIR) (bundle/, catalog/,
# catalog.Dockerfile). The image it names is this commit's, by digest, from
# a pinned copy of config/ (the tree is left alone).
VERSION            ?= v0.0.0-dev
IMAGE_REPO         ?= ghcr.io/appuio/machine-api-provider
BUNDLE_REPO_PREFIX ?= $(IMAGE_REPO)
CATALOG_IMAGE      ?= $(IMAGE_REPO)-catalog:$(VERSION)
OLM_CHANNEL        ?= stable
OLM_OPENSHIFT      ?= v4.16
OPM_IMAGE          ?= quay.io/operator-framework/opm:v1.61.0
CLOUDS             := cloudscale exoscale
RELEASE_DIR        ?= $(OUTPUT_DIR)/release/$(VERSION)
OLM_DIR            ?= $(OUTPUT_DIR)/olm
RELEASE_ALLOW_DIRTY ?=
# The release tool (hack/release): pin, notes, bundle, catalog.
RELEASE_TOOL       := $(OUTPUT_DIR)/tools/release
# config/ with the image pinned, where the release and the bundle render from.
PINNED_CONFIG      := $(OUTPUT_DIR)/pinned

.PHONY: release-tool
release-tool:
	cd hack/release && GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -o $(RELEASE_TOOL) .

# pinned-config: $(PINNED_CONFIG)/config, a copy of config/ with config/image
# naming the image just built by digest, and for a release (RUNBOOKS_REF, the
# tag) the alerts' runbook_url pointing at the tag's runbooks, not main's.
RUNBOOKS_REF ?=
.PHONY: pinned-config
pinned-config: image release-tool
	@rm -rf $(PINNED_CONFIG) && mkdir -p $(PINNED_CONFIG) && cp -R config $(PINNED_CONFIG)/config
	$(RELEASE_TOOL) pin --file $(PINNED_CONFIG)/config/image/kustomization.yaml \
		--image $(IMAGE_REPO)@$$(cat $(IMAGE_TAR).digest) \
		$(if $(RUNBOOKS_REF),--rules $(PINNED_CONFIG)/config/prometheus/prometheusrule.yaml --runbooks-ref $(RUNBOOKS_REF))

.PHONY: bundle
bundle: pinned-config $(KUSTOMIZE)
	@rm -rf $(OLM_DIR)/bundle $(OLM_DIR)/catalog && mkdir -p $(OLM_DIR)/bundle $(OLM_DIR)/catalog
	@for cloud in $(CLOUDS); do \
		pkg=machine-api-provider-$$cloud; \
		$(KUSTOMIZE) build $(PINNED_CONFIG)/config/overlays/$$cloud > $(OLM_DIR)/bundle/$$cloud.objects.yaml && \
		$(KUSTOMIZE) build $(PINNED_CONFIG)/config/olm/$$cloud > $(OLM_DIR)/bundle/$$cloud.csv.yaml && \
		$(RELEASE_TOOL) bundle --objects $(OLM_DIR)/bundle/$$cloud.objects.yaml --csv $(OLM_DIR)/bundle/$$cloud.csv.yaml \
			--icon config/olm/base/icon.svg --package $$pkg --channel $(OLM_CHANNEL) --version $(VERSION) \
			--openshift-versions $(OLM_OPENSHIFT) --source-date-epoch $(SOURCE_DATE_EPOCH) --out $(OLM_DIR)/bundle/$$cloud && \
		rm $(OLM_DIR)/bundle/$$cloud.objects.yaml $(OLM_DIR)/bundle/$$cloud.csv.yaml && \
		(cd hack/image && GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) run . --bundle $(OLM_DIR)/bundle/$$cloud \
			--arch $(IMAGE_ARCH) --name $(BUNDLE_REPO_PREFIX)-$$cloud-bundle:$(VERSION) \
			--source-date-epoch $(SOURCE_DATE_EPOCH) \
			--output $(OLM_DIR)/bundle/$$pkg-bundle.oci.tar --digest-file $(OLM_DIR)/bundle/$$pkg-bundle.oci.tar.digest) && \
		$(RELEASE_TOOL) catalog --bundle $(OLM_DIR)/bundle/$$cloud \
			--bundle-image $(BUNDLE_REPO_PREFIX)-$$cloud-bundle@$$(cat $(OLM_DIR)/bundle/$$pkg-bundle.oci.tar.digest) \
			--out $(OLM_DIR)/catalog/$$pkg/catalog.yaml || exit 1; \
	done
	@printf '%s\n' \
		'# The catalog image of these packages (opm serves the file-based catalog):' \
		'#   podman build -f catalog.Dockerfile -t $(CATALOG_IMAGE) .' \
		'FROM $(OPM_IMAGE)' \
		'ENTRYPOINT ["/bin/opm"]' \
		'CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]' \
		'ADD catalog /configs' \
		'RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]' \
		'LABEL operators.operatorframework.io.index.configs.v1=/configs' > $(OLM_DIR)/catalog.Dockerfile
	@echo "$(OLM_DIR): bundle/ (bundles and their images), catalog/, catalog.Dockerfile"

# The command-line tool for the admin's machine (adopt, install-manifests,
# uninstall), static, one per platform of RELEASE_PLATFORMS, named
# machine-api-provider-<os>-<arch>, with the release's version
# (`machine-api-provider --version`). The linux/amd64 build reuses what the
# image's build compiled; each other platform compiles the module once more
# (docs/releasing.md has the cost).
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
.PHONY: release-binaries
release-binaries:
	@mkdir -p $(RELEASE_DIR)
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "go build machine-api-provider-$$os-$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false \
			-ldflags '$(IMAGE_LDFLAGS) -X main.version=$(VERSION) $(if $(RELEASE_IMAGE),-X main.releaseImage=$(RELEASE_IMAGE))' \
			-o $(RELEASE_DIR)/machine-api-provider-$$os-$$arch ./cmd/machine-api-provider || exit 1; \
	done

# The tool of every platform of a release but this machine's, compiled and
# checked to be its platform's and static (`go version -m`): make test's
# release test builds this machine's only (each other platform compiles the
# ~1,100 packages of the module once more), CI builds these beside the tests
# that wait, at the lowest priority (.ci/run).
CROSS_PLATFORMS ?= $(filter-out $(GOHOSTOS)/$(GOHOSTARCH),$(RELEASE_PLATFORMS))
.PHONY: cross
cross:
	$(MAKE) --no-print-directory release-binaries RELEASE_PLATFORMS='$(CROSS_PLATFORMS)' RELEASE_DIR=$(OUTPUT_DIR)/cross
	@for p in $(CROSS_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; f=$(OUTPUT_DIR)/cross/machine-api-provider-$$os-$$arch; \
		info=$$($(GO) version -m $$f) || exit 1; \
		for want in "GOOS=$$os" "GOARCH=$$arch" "CGO_ENABLED=0"; do \
			if ! grep -q "build[[:space:]]*$$want\$$" <<<"$$info"; then echo "$$f: not built with $$want:" >&2; echo "$$info" >&2; exit 1; fi; \
		done; \
		echo "$$f: $$os/$$arch, static"; \
	done

.PHONY: release
release: $(CYCLONEDX_GOMOD) $(KUSTOMIZE)
	@if [[ -z "$(RELEASE_ALLOW_DIRTY)" && -n "$$(git status --porcelain -- . ':(exclude)config/image')" ]]; then \
		echo "make release: the tree has changes; the image is built from the commit, so commit them first (RELEASE_ALLOW_DIRTY=1 overrides):" >&2; \
		git status --short -- . ':(exclude)config/image' >&2; exit 1; \
	fi
	$(MAKE) --no-print-directory bundle IMAGE=$(IMAGE_REPO):$(VERSION) OLM_DIR=$(RELEASE_DIR) RUNBOOKS_REF=$(VERSION)
	$(RELEASE_TOOL) notes --changelog CHANGELOG.md --version $(VERSION) \
		--image $(IMAGE_REPO)@$$(cat $(IMAGE_TAR).digest) --out $(RELEASE_DIR)/RELEASE_NOTES.md \
		--signer-identity '$(RELEASE_SIGNER)' --signer-issuer '$(RELEASE_SIGNER_ISSUER)'
	cp $(IMAGE_TAR) $(IMAGE_TAR).digest $(RELEASE_DIR)/
	@for cloud in $(CLOUDS); do \
		$(KUSTOMIZE) build $(PINNED_CONFIG)/config/overlays/$$cloud > $(RELEASE_DIR)/install-$$cloud.yaml || exit 1; \
	done
	$(CYCLONEDX_GOMOD) bin -json -licenses -noserial -notimestamp -version $(VERSION) \
		-output $(RELEASE_DIR)/machine-api-provider.cdx.json $(IMAGE_BIN)
	$(MAKE) --no-print-directory release-binaries RELEASE_IMAGE=$(IMAGE_REPO)@$$(cat $(IMAGE_TAR).digest)
	cd $(RELEASE_DIR) && find . -type f ! -name SHA256SUMS | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	cp $(PINNED_CONFIG)/config/image/kustomization.yaml config/image/kustomization.yaml
	@echo "$(RELEASE_DIR): release $(VERSION) of $(IMAGE_REPO)@$$(cat $(IMAGE_TAR).digest)"
	@echo "config/image/kustomization.yaml pins that image: for a release, commit it alone and tag the commit $(VERSION)"
	@echo "(docs/releasing.md); otherwise put it back with: git checkout config/image/kustomization.yaml"

# Signing a release (docs/releasing.md, step 5): Sigstore's cosign, keyless
# (a short-lived certificate for the releaser's OIDC identity, RELEASE_SIGNER,
# logged in Sigstore's public transparency log; no key to keep). cosign is
# run at its pinned version straight from the Go module proxy (go run
# module@version checks it against the checksum database): it is no tool of
# make tools, and no test runs it (signing needs Sigstore's services).
# make release names the signer in the notes when RELEASE_SIGNER is set;
# make release-sign then signs SHA256SUMS into SHA256SUMS.sigstore.json, and
# once the images are pushed (RELEASE_PUSHED=1), the image and its SBOM.
RELEASE_SIGNER        ?=
RELEASE_SIGNER_ISSUER ?= https://github.com/login/oauth
COSIGN_VERSION        ?= v3.1.3
COSIGN                 = $(GO) run github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION)
RELEASE_PUSHED        ?=
.PHONY: release-sign
release-sign:
	@if [[ -z "$(RELEASE_SIGNER)" ]]; then echo "make release-sign: set RELEASE_SIGNER (and RELEASE_SIGNER_ISSUER) as for make release: the notes name them" >&2; exit 1; fi
	@grep -qF -- "--certificate-identity '$(RELEASE_SIGNER)'" $(RELEASE_DIR)/RELEASE_NOTES.md || \
		{ echo "make release-sign: $(RELEASE_DIR)/RELEASE_NOTES.md does not name $(RELEASE_SIGNER): make release RELEASE_SIGNER=$(RELEASE_SIGNER) first" >&2; exit 1; }
	cd $(RELEASE_DIR) && $(COSIGN) sign-blob --yes --bundle SHA256SUMS.sigstore.json SHA256SUMS
	@if [[ -n "$(RELEASE_PUSHED)" ]]; then \
		image=$(IMAGE_REPO)@$$(cat $(RELEASE_DIR)/machine-api-provider.oci.tar.digest); \
		$(COSIGN) sign --yes $$image && \
		$(COSIGN) attest --yes --type cyclonedx --predicate $(RELEASE_DIR)/machine-api-provider.cdx.json $$image; \
	else echo "the image is not signed yet: push it (docs/releasing.md), then make release-sign RELEASE_PUSHED=1"; fi

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
PROMTOOL    := $(BIN_DIR)/promtool
KUSTOMIZE_OC := $(BIN_DIR)/kustomize-oc
CYCLONEDX_GOMOD := $(BIN_DIR)/cyclonedx-gomod

.PHONY: tools kube etcd kwok staticcheck kustomize kustomize-oc cyclonedx-gomod cluster-autoscaler cluster-autoscaler-operator promtool
tools: kube etcd kwok staticcheck kustomize kustomize-oc cyclonedx-gomod cluster-autoscaler cluster-autoscaler-operator promtool
kube: $(KUBE_BINS)
etcd: $(ETCD_BIN)
kwok: $(KWOK_BIN) $(KWOK_STAGES)
staticcheck: $(LINT_BINS)
cluster-autoscaler: $(CLUSTER_AUTOSCALER_BIN)
cluster-autoscaler-operator: $(CLUSTER_AUTOSCALER_OPERATOR_BIN)
kustomize: $(KUSTOMIZE)
promtool: $(PROMTOOL)
kustomize-oc: $(KUSTOMIZE_OC)
cyclonedx-gomod: $(CYCLONEDX_GOMOD)

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
# Static (CGO_ENABLED=0), as upstream releases them, like etcd and kwok:
# the demo's container image has no C library (make demo-image); "static"
# in the stamps' names replaces the dynamically linked builds of before.
KUBE_MAJOR := $(word 1,$(subst ., ,$(KUBE_VERSION:v%=%)))
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION:v%=%)))
KUBE_VERSION_VARS = gitVersion=$(KUBE_VERSION) gitMajor=$(KUBE_MAJOR) gitMinor=$(KUBE_MINOR) \
	gitCommit=0000000000000000000000000000000000000000 gitTreeState=clean buildDate=$$build_date
KUBE_LDFLAGS = $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	$(foreach kv,$(KUBE_VERSION_VARS),-X $(pkg).$(kv)))

$(KUBE_BINS) &: $(BIN_DIR)/.kube-$(KUBE_VERSION)-static.stamp $(TOOLS_DIR)/kubernetes/go.mod $(TOOLS_DIR)/kubernetes/go.sum
	$(call check-pin,$(TOOLS_DIR)/kubernetes,k8s.io/kubernetes,$(KUBE_VERSION))
	cd $(TOOLS_DIR)/kubernetes && \
	build_date=$$($(GO) list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes) && \
	CGO_ENABLED=0 GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w $(KUBE_LDFLAGS)" -o $(BIN_DIR)/ \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler
	@touch $(KUBE_BINS)

# etcd: the main package is the root of go.etcd.io/etcd/server/v3.
$(ETCD_BIN): $(BIN_DIR)/.etcd-$(ETCD_VERSION)-static.stamp $(TOOLS_DIR)/etcd/go.mod $(TOOLS_DIR)/etcd/go.sum
	$(call check-pin,$(TOOLS_DIR)/etcd,go.etcd.io/etcd/server/v3,$(ETCD_VERSION))
	cd $(TOOLS_DIR)/etcd && \
	CGO_ENABLED=0 GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=none" \
		-o $@ go.etcd.io/etcd/server/v3
	@touch $@

$(KWOK_BIN): $(BIN_DIR)/.kwok-$(KWOK_VERSION)-static.stamp $(TOOLS_DIR)/kwok/go.mod $(TOOLS_DIR)/kwok/go.sum
	$(call check-pin,$(TOOLS_DIR)/kwok,sigs.k8s.io/kwok,$(KWOK_VERSION))
	cd $(TOOLS_DIR)/kwok && \
	CGO_ENABLED=0 GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$(KWOK_VERSION)" \
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

# promtool: `promtool --version` prints what prometheus/common/version
# holds, set here as Prometheus's own release build sets it (the version
# from the module's VERSION file). The tag remove_all_sd leaves out the
# service discovery plugins and their cloud SDKs, which checking and
# unit-testing rules never use.
PROMTOOL_MODULE := github.com/prometheus/prometheus
PROMTOOL_LDFLAGS = -s -w -X github.com/prometheus/common/version.Version=$$(cat $$($(GO) list -m -f '{{.Dir}}' $(PROMTOOL_MODULE))/VERSION) \
	-X github.com/prometheus/common/version.Revision=$(PROMTOOL_VERSION) -X github.com/prometheus/common/version.Branch=HEAD
$(PROMTOOL): $(BIN_DIR)/.promtool-$(PROMTOOL_VERSION).stamp $(TOOLS_DIR)/promtool/go.mod $(TOOLS_DIR)/promtool/go.sum
	$(call check-pin,$(TOOLS_DIR)/promtool,$(PROMTOOL_MODULE),$(PROMTOOL_VERSION))
	cd $(TOOLS_DIR)/promtool && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -tags remove_all_sd -ldflags "$(PROMTOOL_LDFLAGS)" \
		-o $@ $(PROMTOOL_MODULE)/cmd/promtool
	@touch $@

# kustomize-oc: the kustomize `oc` embeds, as bin/kustomize-oc (no build date:
# kustomize v5.0 has no provenance variable for it).
$(KUSTOMIZE_OC): $(BIN_DIR)/.kustomize-oc-$(KUSTOMIZE_OC_VERSION).stamp $(TOOLS_DIR)/kustomize-oc/go.mod $(TOOLS_DIR)/kustomize-oc/go.sum
	$(call check-pin,$(TOOLS_DIR)/kustomize-oc,sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_OC_VERSION))
	cd $(TOOLS_DIR)/kustomize-oc && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w" -o $@ sigs.k8s.io/kustomize/kustomize/v5
	@touch $@

# cyclonedx-gomod: the SBOM of each release's image (make release).
$(CYCLONEDX_GOMOD): $(BIN_DIR)/.cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION).stamp $(TOOLS_DIR)/cyclonedx/go.mod $(TOOLS_DIR)/cyclonedx/go.sum
	$(call check-pin,$(TOOLS_DIR)/cyclonedx,github.com/CycloneDX/cyclonedx-gomod,$(CYCLONEDX_GOMOD_VERSION))
	cd $(TOOLS_DIR)/cyclonedx && \
	GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -ldflags "-s -w" -o $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
	@touch $@

# kwok simulates nothing without stages: write kwok's own (node ready and
# heartbeat, pod ready, complete, delete) from its module, for --config.
$(KWOK_STAGES): $(BIN_DIR)/.kwok-$(KWOK_VERSION)-static.stamp $(TOOLS_DIR)/kwok/go.mod $(TOOLS_DIR)/kwok/go.sum $(TOOLS_DIR)/kwok/stages/main.go
	cd $(TOOLS_DIR)/kwok && GOOS=$(GOHOSTOS) GOARCH=$(GOHOSTARCH) GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) run ./stages $@

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

# The machine-api-operator's controllers of each OpenShift era `make matrix`
# runs, into bin/mao-<era>/ as the operator's image holds them (its
# Dockerfile: /machineset-controller, /nodelink-controller,
# /machine-healthcheck), static (CGO_ENABLED=0: the pod runner runs them
# chrooted), with the version stamped as the operator's Makefile does; beside
# them webhooks (prints the Machine and MachineSet webhook configurations the
# era's operator installs) and install/, the era's manifests (its Machine API
# CRDs, the webhook and metrics Services, the kube-rbac-proxy ConfigMap).
# One wrapper module, hack/tools/mao, with a module file per era
# (-modfile=mao-<era>.mod); a new pin or module file rebuilds the era.
MAO_MODULE := github.com/openshift/machine-api-operator
MAO_DIR    := $(TOOLS_DIR)/mao
MAO_CMDS   := $(MAO_MODULE)/cmd/machineset $(MAO_MODULE)/cmd/nodelink-controller $(MAO_MODULE)/cmd/machine-healthcheck
mao-version = $(MAO_$(subst .,_,$(1))_VERSION)
MAO_BINS   := $(foreach e,$(MATRIX_ERAS),$(BIN_DIR)/mao-$(e)/machineset-controller)

.PHONY: $(addprefix mao-,$(MATRIX_ERAS))
$(addprefix mao-,$(MATRIX_ERAS)): mao-%: $(BIN_DIR)/mao-%/machineset-controller

.SECONDEXPANSION:
$(MAO_BINS): $(BIN_DIR)/mao-%/machineset-controller: $$(BIN_DIR)/.mao-%-$$(call mao-version,$$*).stamp \
		$(MAO_DIR)/mao-%.mod $(MAO_DIR)/mao-%.sum $(MAO_DIR)/webhooks/main.go
	@if [[ -z "$(call mao-version,$*)" ]]; then echo "error: no MAO_$(subst .,_,$*)_VERSION in the Makefile for the era $*" >&2; exit 1; fi
	@got=$$(cd $(MAO_DIR) && $(GO) list -modfile=mao-$*.mod -m -f '{{.Version}}' $(MAO_MODULE)); \
	if [[ "$$got" != "$(call mao-version,$*)" ]]; then \
		echo "error: $(MAO_DIR)/mao-$*.mod pins $(MAO_MODULE) $$got but the Makefile wants $(call mao-version,$*);" \
			"update it (cd $(MAO_DIR) && GOFLAGS=-mod=mod go get -modfile=mao-$*.mod $(MAO_MODULE)/cmd/machineset@$(call mao-version,$*) && go mod tidy -modfile=mao-$*.mod)." >&2; \
		exit 1; \
	fi
	@out=$(BIN_DIR)/mao-$* && rm -rf $$out.tmp && mkdir -p $$out.tmp && \
	cd $(MAO_DIR) && \
	echo "mao-$*: go build $(MAO_MODULE)@$(call mao-version,$*)" && \
	CGO_ENABLED=0 GOFLAGS='$(TOOLS_GOFLAGS)' $(GO) build -modfile=mao-$*.mod \
		-ldflags "-s -w -X $(MAO_MODULE)/pkg/version.Raw=$(call mao-version,$*)" -o $$out.tmp/ $(MAO_CMDS) ./webhooks && \
	mv $$out.tmp/machineset $$out.tmp/machineset-controller && \
	src=$$($(GO) list -modfile=mao-$*.mod -m -f '{{.Dir}}' $(MAO_MODULE)) && \
	cp -R $$src/install $$out.tmp/install && chmod -R u+w $$out.tmp/install && \
	rm -rf $$out && mv $$out.tmp $$out
	@touch $@

# The patches apply exactly (no fuzz, no offset) to the pinned version in the
# module cache and touch only the files they may: a plain go test of the
# wrapper module, seconds; part of `make test`.
.PHONY: test-patches
test-patches: export GONOSUMDB := k8s.io/autoscaler
test-patches:
	cd $(TOOLS_DIR)/cluster-autoscaler && $(GO) test -count=1 ./patches/
