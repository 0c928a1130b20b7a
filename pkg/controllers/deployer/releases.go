package deployer

// What the deployer knows of each OpenShift release's Machine API
// controllers. The controllers Deployment runs the machineset, nodelink and
// machine-healthcheck binaries from the cluster's own machine-api-operator
// image, so their flags and the permissions they need are those of the
// cluster's release, not of the machine-api-operator version this module
// pins. Every such fact lives in the table below, read from the
// machine-api-operator's release branches (cmd/*/main.go for the flags,
// pkg/controller/* for the API writes). The Deployment's arguments come from
// it (Release.args), config/rbac grants the union of its permissions
// (test/manifests checks that), docs/support.md shows it, and `make matrix`
// runs the real binaries of three eras with what it says.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MigrationGate is what a release's machineset-controller makes of the
// MachineAPIMigration feature gate.
type MigrationGate int

const (
	// GateAbsent: the binary has no --feature-gates flag at all (up to
	// 4.16); passing one stops it at start ("flag provided but not
	// defined").
	GateAbsent MigrationGate = iota
	// GateSettable: --feature-gates is there and MachineAPIMigration can be
	// set; the deployer sets it to false, as the provider takes no part in
	// the migration to Cluster API.
	GateSettable
	// GateLocked: the gate can no longer be set (a release where it is
	// locked to its default, or gone with --feature-gates still there);
	// the deployer passes none. No release known today is so; the value is
	// here so that the one that is gets a row, not new code.
	GateLocked
)

// Release is one OpenShift release (major.minor) as the deployer renders
// for it.
type Release struct {
	// Major and Minor are x and y of x.y.
	Major, Minor int
	// MigrationGate: how the machineset-controller takes
	// --feature-gates=MachineAPIMigration=false.
	MigrationGate MigrationGate
	// StatusWrite is the verb the machineset controller (MachineSet
	// status) and the nodelink controller (Machine status) write status
	// with: "update" up to 4.18 (Status().Update), "patch" from 4.19.
	StatusWrite string
	// TLSFlags: the machineset-controller takes --tls-min-version and
	// --tls-cipher-suites for its webhook server (4.22 and later), and
	// the operator renders them, for it and for the kube-rbac-proxy
	// sidecars, from the cluster's APIServer TLS profile; so does the
	// deployer (tlsprofile.go).
	TLSFlags bool
	// EventsGroup is the API group the machineset and
	// machine-healthcheck controllers write their Events in: "" (core
	// v1 Events, controller-runtime's record.EventRecorder) up to 4.21,
	// "events.k8s.io" (events.k8s.io/v1, controller-runtime 0.23's
	// events.EventRecorder: create, and patch for a series) from 4.22.
	EventsGroup string
	// Flags are the flags each binary of the release defines: no
	// rendered argument may name another (TestRenderedFlagsAreDefined).
	Flags Flags
	// Autoscaler is how the release's own cluster-autoscaler (the
	// openshift/kubernetes-autoscaler release branch, which the
	// cluster-autoscaler-operator runs) sets a MachineSet's size: what
	// docs/support.md says about scaling to zero.
	Autoscaler AutoscalerScale
	// Supported: the provider supports clusters of this release (4.16 to
	// 5.0). The others are known, so rendered right, but not supported.
	Supported bool
	// Matrix is the machine-api-operator module version `make matrix`
	// builds this release's controllers from, "" for a release another
	// era's run covers (MatrixEra) or none does. The Go module proxy
	// serves these.
	Matrix string
	// MatrixEra is the release ("4.21") whose `make matrix` era covers
	// this one: the same flags and verbs as that era's binaries. "" when
	// no era does (table only: no version of the release's code is
	// served by the Go module proxy).
	MatrixEra string
}

// AutoscalerScale is how a release's cluster-autoscaler writes a
// MachineSet's replicas (cluster-autoscaler/cloudprovider/clusterapi/
// clusterapi_unstructured.go, SetSize, on the release's branch of
// openshift/kubernetes-autoscaler, built as images/cluster-autoscaler/
// Dockerfile.rhel says). Every way OpenShift's build has sends a size of 0:
// upstream's omitempty bug (a merge patch marshalled from autoscalingv1.Scale
// drops "replicas": 0), which hack/tools/cluster-autoscaler's patch fixes in
// the upstream build the e2e runs, is in none of them.
type AutoscalerScale string

const (
	// ScaleUpdate: Get of the scale subresource, then Update of the whole
	// Scale (4.14 to 4.19): an update replaces it, so a replicas left out
	// (autoscalingv1's omitempty int32, at 0) is 0.
	ScaleUpdate AutoscalerScale = "update"
	// ScaleMergePatch: a merge patch of the scale subresource marshalled
	// from a Scale of its own whose replicas is a pointer, so 0 is sent
	// (4.20 to 4.23, -tags clusterapi).
	ScaleMergePatch AutoscalerScale = "merge patch"
	// ScaleOpenShiftProvider: the same merge patch, by a cloud provider of
	// OpenShift's own for machine.openshift.io MachineSets
	// (cloudprovider/openshift/openshift_unstructured.go; built with
	// -tags openshift from 5.0). It takes a MachineSet whose
	// spec.authoritativeAPI is MachineAPI or absent
	// (openshift_utils.go, isScalableResourceMachineAPIAuthoritative).
	ScaleOpenShiftProvider AutoscalerScale = "merge patch (openshift provider)"
)

// Describe says in a few words how the autoscaler scales to zero.
func (a AutoscalerScale) Describe() string {
	switch a {
	case ScaleUpdate:
		return "`-tags clusterapi`: gets the scale subresource and updates it whole; an update's `replicas` is 0 when left out"
	case ScaleMergePatch:
		return "`-tags clusterapi`: merge patch of the scale subresource with a pointer `replicas`; 0 is sent"
	case ScaleOpenShiftProvider:
		return "`-tags openshift` (a provider of OpenShift's own for Machine API MachineSets): merge patch with a pointer `replicas`; 0 is sent"
	}
	return string(a)
}

// Flags are the command-line flags of a release's binaries, by container:
// the three machine-api-operator binaries (their cmd/*/main.go and klog's
// InitFlags) and the kube-rbac-proxy sidecars (the flags the operator's
// pkg/operator/sync.go passes them on the release's branch; the release's
// kube-rbac-proxy image takes them).
type Flags struct {
	MachineSet, NodeLink, MachineHealthCheck, KubeRBACProxy []string
}

// Of returns the flags of the container named name, and whether the table
// records them (not for the provider's own machine-controller).
func (f Flags) Of(container string) ([]string, bool) {
	switch {
	case container == MachineSetContainer:
		return f.MachineSet, true
	case container == NodeLinkContainer:
		return f.NodeLink, true
	case container == MachineHealthCheckContainer:
		return f.MachineHealthCheck, true
	case strings.HasPrefix(container, ProxyContainerPrefix):
		return f.KubeRBACProxy, true
	}
	return nil, false
}

// The flag sets of the table, read from the machine-api-operator's release
// branches (github.com/openshift/machine-api-operator).
var (
	// klogFlags: klog.InitFlags, which all three binaries call
	// (vendor/k8s.io/klog/v2/klog.go; v2.100.1 on release-4.14, v2.130.1
	// on release-4.21 and release-4.22: the same flags).
	klogFlags = []string{"log_dir", "log_file", "log_file_max_size", "logtostderr", "alsologtostderr", "v",
		"add_dir_header", "skip_headers", "one_output", "skip_log_headers", "stderrthreshold", "vmodule", "log_backtrace_at"}
	// klogFlags50: klog v2.140.0 (release-5.0's go.mod) adds two; the
	// binaries of release-5.0 set them in main() (no argument of ours
	// changes).
	klogFlags50 = flagSet(klogFlags, []string{"legacy_stderr_threshold_behavior", "alsologtostderrthreshold"})
	// leaderFlags: --namespace and leader election, in every binary's
	// cmd/*/main.go since release-4.14.
	leaderFlags = []string{"namespace", "leader-elect", "leader-elect-lease-duration", "leader-elect-resource-namespace"}
	// cmd/machineset/main.go, release-4.14 to release-4.16.
	machineSetOwn414 = flagSet(leaderFlags, []string{"metrics-bind-address", "health-addr", "webhook-enabled", "webhook-port", "webhook-cert-dir"})
	// cmd/machineset/main.go from release-4.17: --feature-gates
	// (flag.Var on 4.17, library-go's AddFlagsToGoFlagSet from 4.18).
	machineSetOwn417 = flagSet(machineSetOwn414, []string{"feature-gates"})
	// cmd/machineset/main.go from release-4.22 (commit 0edbe3eab, "Honor
	// API server TLS policy across MAO components"): pflag, and
	// --tls-min-version and --tls-cipher-suites.
	machineSetOwn422 = flagSet(machineSetOwn417, []string{"tls-min-version", "tls-cipher-suites"})
	// cmd/nodelink-controller/main.go, unchanged in its flags from
	// release-4.14 to release-5.1.
	nodeLinkOwn = leaderFlags
	// cmd/machine-healthcheck/main.go, likewise.
	mhcOwn = flagSet(leaderFlags, []string{"metrics-bind-address", "health-addr"})
	// pkg/operator/sync.go newKubeProxyContainer up to release-4.21: a
	// fixed list of cipher suites ...
	kubeRBACProxyFlags414 = []string{"secure-listen-address", "upstream", "config-file", "tls-cert-file", "tls-private-key-file",
		"tls-cipher-suites", "logtostderr", "v"}
	// ... and from release-4.22 getTLSArgs' flags, the cluster's TLS
	// profile.
	kubeRBACProxyFlags422 = flagSet(kubeRBACProxyFlags414, []string{"tls-min-version"})

	flags414 = Flags{MachineSet: flagSet(klogFlags, machineSetOwn414), NodeLink: flagSet(klogFlags, nodeLinkOwn),
		MachineHealthCheck: flagSet(klogFlags, mhcOwn), KubeRBACProxy: kubeRBACProxyFlags414}
	flags417 = Flags{MachineSet: flagSet(klogFlags, machineSetOwn417), NodeLink: flagSet(klogFlags, nodeLinkOwn),
		MachineHealthCheck: flagSet(klogFlags, mhcOwn), KubeRBACProxy: kubeRBACProxyFlags414}
	flags422 = Flags{MachineSet: flagSet(klogFlags, machineSetOwn422), NodeLink: flagSet(klogFlags, nodeLinkOwn),
		MachineHealthCheck: flagSet(klogFlags, mhcOwn), KubeRBACProxy: kubeRBACProxyFlags422}
	flags50 = Flags{MachineSet: flagSet(klogFlags50, machineSetOwn422), NodeLink: flagSet(klogFlags50, nodeLinkOwn),
		MachineHealthCheck: flagSet(klogFlags50, mhcOwn), KubeRBACProxy: kubeRBACProxyFlags422}
)

func flagSet(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

// Releases are the known releases, oldest first. The eras `make matrix`
// runs: 4.16 (no --feature-gates, status by update), 4.18 (--feature-gates,
// status by update) and 4.21 (--feature-gates, status by patch); every
// other release up to 4.21 has the flags and verbs of one of them. 4.22,
// 4.23 and 5.0 are in the table only: the Go module proxy serves none of
// their code (see MatrixEra).
var Releases = []Release{
	// machine-api-operator release-4.14 to release-4.16: cmd/machineset/
	// main.go defines no --feature-gates; pkg/controller/machineset/
	// status.go and pkg/controller/nodelink/nodelink_controller.go write
	// status with Status().Update; core Events. openshift/kubernetes-
	// autoscaler release-4.14 to release-4.19: clusterapi_unstructured.go
	// SetSize gets the scale subresource and updates it (ScaleUpdate).
	{Major: 4, Minor: 14, MigrationGate: GateAbsent, StatusWrite: "update", Flags: flags414, Autoscaler: ScaleUpdate, MatrixEra: "4.16"},
	{Major: 4, Minor: 15, MigrationGate: GateAbsent, StatusWrite: "update", Flags: flags414, Autoscaler: ScaleUpdate, MatrixEra: "4.16"},
	{Major: 4, Minor: 16, MigrationGate: GateAbsent, StatusWrite: "update", Flags: flags414, Autoscaler: ScaleUpdate, Supported: true, MatrixEra: "4.16",
		// the version openshift/machine-api-provider-aws pins on release-4.16
		Matrix: "v0.2.1-0.20240125175440-c9de8bda0dd1"},
	// release-4.17 and release-4.18: cmd/machineset/main.go defines
	// --feature-gates (flag.Var on 4.17, library-go's
	// AddFlagsToGoFlagSet on 4.18) with MachineAPIMigration;
	// status.go and nodelink_controller.go still Status().Update.
	{Major: 4, Minor: 17, MigrationGate: GateSettable, StatusWrite: "update", Flags: flags417, Autoscaler: ScaleUpdate, Supported: true, MatrixEra: "4.18"},
	{Major: 4, Minor: 18, MigrationGate: GateSettable, StatusWrite: "update", Flags: flags417, Autoscaler: ScaleUpdate, Supported: true, MatrixEra: "4.18",
		// the version openshift/machine-api-provider-aws pins on release-4.18
		Matrix: "v0.2.1-0.20240924110326-1efafa4a6615"},
	// release-4.19 to release-4.21: status.go and nodelink_controller.go
	// write status with Status().Patch; flags as 4.18's.
	{Major: 4, Minor: 19, MigrationGate: GateSettable, StatusWrite: "patch", Flags: flags417, Autoscaler: ScaleUpdate, Supported: true, MatrixEra: "4.21"},
	// openshift/kubernetes-autoscaler release-4.20 to release-4.23:
	// SetSize sends a merge patch of a Scale struct of its own with a
	// pointer replicas (ScaleMergePatch).
	{Major: 4, Minor: 20, MigrationGate: GateSettable, StatusWrite: "patch", Flags: flags417, Autoscaler: ScaleMergePatch, Supported: true, MatrixEra: "4.21"},
	{Major: 4, Minor: 21, MigrationGate: GateSettable, StatusWrite: "patch", Flags: flags417, Autoscaler: ScaleMergePatch, Supported: true, MatrixEra: "4.21",
		// the version go.mod pins (release-4.21)
		Matrix: "v0.2.1-0.20251115003740-026e9dff6a1c"},
	// release-4.22 (tip 78c5104d9): cmd/machineset/main.go takes the TLS
	// flags and, without them, reads apiservers.config.openshift.io/
	// cluster itself (pkg/tls/tls.go, errors only logged);
	// pkg/operator/sync.go renders them (getTLSArgs) for the
	// machineset-controller and the kube-rbac-proxy sidecars.
	// pkg/controller/machineset/controller.go and
	// pkg/controller/machinehealthcheck/machinehealthcheck_controller.go
	// record with mgr.GetEventRecorder (controller-runtime v0.23.3, go.mod:
	// events.k8s.io/v1); install/0000_30_machine-api-operator_09_rbac.yaml
	// grants the operator's controllers events.k8s.io events and
	// apiservers. Status writes unchanged (patch). Kubernetes 0.35.
	{Major: 4, Minor: 22, MigrationGate: GateSettable, StatusWrite: "patch", TLSFlags: true, EventsGroup: "events.k8s.io",
		Flags: flags422, Autoscaler: ScaleMergePatch, Supported: true},
	// release-4.23 and release-5.0 are one commit (0db39ee37, 2026-08-05):
	// against release-4.22, cmd/{machineset,nodelink-controller,
	// machine-healthcheck}/main.go only set klog's
	// legacy_stderr_threshold_behavior=false and stderrthreshold=INFO
	// themselves (klog v2.140.0; no flag of ours added or removed), and
	// pkg/operator/sync.go puts openshift.io/required-scc on the pod
	// template (the deployer does already). MachineAPIMigration stays
	// settable (cmd/machineset/main.go registers it;
	// vendor/github.com/openshift/api/features/features.go enables it
	// only in TechPreview and DevPreview). Kubernetes 0.36,
	// controller-runtime v0.24.1. The two differ in the autoscaler:
	// openshift/kubernetes-autoscaler release-4.23 builds -tags
	// clusterapi, release-5.0 -tags openshift
	// (images/cluster-autoscaler/Dockerfile.rhel).
	{Major: 4, Minor: 23, MigrationGate: GateSettable, StatusWrite: "patch", TLSFlags: true, EventsGroup: "events.k8s.io",
		Flags: flags50, Autoscaler: ScaleMergePatch, Supported: true},
	{Major: 5, Minor: 0, MigrationGate: GateSettable, StatusWrite: "patch", TLSFlags: true, EventsGroup: "events.k8s.io",
		Flags: flags50, Autoscaler: ScaleOpenShiftProvider, Supported: true},
	// release-5.1 (951196122, the same commit as main and release-5.2 on
	// 2026-08-17) is not a row: a 5.1 cluster gets 5.0's arguments and is
	// told so (FitNewer). Against release-5.0 its cmd/machineset/main.go
	// only stops registering the VSphereMultiDisk gate; the flags, the
	// event API, the status writes and
	// install/0000_30_machine-api-operator_09_rbac.yaml's rules for the
	// controllers are 5.0's, so 5.0's arguments run.
}

// String is "x.y".
func (r Release) String() string { return fmt.Sprintf("%d.%d", r.Major, r.Minor) }

// before reports whether r is an older release than o.
func (r Release) before(o Release) bool {
	return r.Major < o.Major || (r.Major == o.Major && r.Minor < o.Minor)
}

// Newest is the newest known release.
func Newest() Release { return Releases[len(Releases)-1] }

// Library is the release whose machine-api-operator this module pins
// (go.mod): the controllers `make demo`, `make e2e` and the integration
// tests run in-process are that release's (TestLibraryIsGoModsPin).
func Library() Release {
	for _, r := range Releases {
		if r.Matrix == libraryVersion {
			return r
		}
	}
	panic("no release of the table has the machine-api-operator version go.mod pins, " + libraryVersion)
}

// libraryVersion is the machine-api-operator version go.mod pins.
const libraryVersion = "v0.2.1-0.20251115003740-026e9dff6a1c"

// Fit says how a cluster's version relates to the known releases.
type Fit string

const (
	// FitKnown: the cluster runs a known release.
	FitKnown Fit = "Known"
	// FitNewer: the cluster runs a release newer than any known; it gets
	// the newest known one's arguments.
	FitNewer Fit = "NewerThanKnown"
	// FitOlder: the cluster runs a release older than any known; it gets
	// the oldest known one's arguments.
	FitOlder Fit = "OlderThanKnown"
	// FitUnknown: the cluster's version could not be read (no
	// ClusterVersion: not OpenShift, or not readable); the newest known
	// release's arguments.
	FitUnknown Fit = "VersionUnknown"
)

// ForVersion returns the release whose arguments a cluster of version v
// ("4.16.23", "4.18.0-rc.1", "5.0.2"; "" when unknown) gets, and how v
// fits.
func ForVersion(v string) (Release, Fit) {
	x, ok := versionOf(v)
	if !ok {
		return Newest(), FitUnknown
	}
	if Newest().before(x) {
		return Newest(), FitNewer
	}
	if x.before(Releases[0]) {
		return Releases[0], FitOlder
	}
	// the release itself or, in a gap of the table, the closest older
	// release's arguments
	best := Releases[0]
	for _, r := range Releases {
		if !x.before(r) {
			best = r
		}
	}
	return best, FitKnown
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(\.|$|-|\+)`)

// versionOf returns major and minor of a version ("4.16.3", "v5.0.0-rc.1")
// as a Release with nothing else set. False when v is no version.
func versionOf(v string) (Release, bool) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return Release{}, false
	}
	x, errX := strconv.Atoi(m[1])
	y, errY := strconv.Atoi(m[2])
	if errX != nil || errY != nil {
		return Release{}, false
	}
	return Release{Major: x, Minor: y}, true
}

// Container arguments per release. The machineset-controller's differ
// between releases (--feature-gates from 4.17, the TLS flags from 4.22), and
// from 4.22 the kube-rbac-proxy sidecars take the TLS flags too; the
// nodelink and machine-healthcheck controllers have taken the same flags
// since 4.14 (--namespace, --leader-elect*, --metrics-bind-address for the
// health check, klog's).

// machineSetArgs are the machineset-controller's arguments beyond the
// shared ones; tls are the TLS flags rendered from the cluster's profile
// (tlsprofile.go), passed only to a release whose binary takes them.
func (r Release) machineSetArgs(tls []string) []string {
	var args []string
	if r.MigrationGate == GateSettable {
		// The provider takes no part in the migration to Cluster API:
		// pinned off so that a release enabling it by default does not
		// hand MachineSets to a Cluster API that is not there.
		args = append(args, "--feature-gates=MachineAPIMigration=false")
	}
	if r.TLSFlags {
		args = append(args, tls...)
	}
	return args
}

// Describe says in a few words what the deployer renders for r, for the
// status and the docs.
func (r Release) Describe() string {
	var d string
	switch r.MigrationGate {
	case GateAbsent:
		d = "machineset-controller without --feature-gates"
	case GateLocked:
		d = "machineset-controller without --feature-gates (MachineAPIMigration is locked)"
	default:
		d = "machineset-controller with --feature-gates=MachineAPIMigration=false"
	}
	if r.TLSFlags {
		d += "; it and the kube-rbac-proxy sidecars with --tls-min-version and --tls-cipher-suites of the APIServer's TLS profile"
	}
	return d
}

// Permission is one kind of request made for a release: by its
// machine-api-operator controllers (ControllerPermissions) or by the
// deployer rendering for it (DeployerPermissions). config/rbac grants the
// union over Releases (test/manifests checks it).
type Permission struct {
	Group, Resource, Verb string
	// Name is the one object the request names ("" for any).
	Name string
	// Why says who makes it.
	Why string
}

// ControllerPermissions are the requests of r's machineset, nodelink and
// machine-healthcheck controllers that differ between releases (the rest
// they have in common is config/rbac's, with its README's reasons).
func (r Release) ControllerPermissions() []Permission {
	events := "core v1 Events of the machineset and machine-healthcheck controllers (record.EventRecorder)"
	if r.EventsGroup != "" {
		events = "events.k8s.io/v1 Events of the machineset and machine-healthcheck controllers (controller-runtime 0.23's events.EventRecorder; patch for a series)"
	}
	ps := []Permission{
		{Group: "machine.openshift.io", Resource: "machines/status", Verb: r.StatusWrite, Why: "nodelink-controller: a Machine's nodeRef"},
		{Group: "machine.openshift.io", Resource: "machinesets/status", Verb: r.StatusWrite, Why: "machineset-controller: a MachineSet's replicas"},
		{Group: r.EventsGroup, Resource: "events", Verb: "create", Why: events},
		{Group: r.EventsGroup, Resource: "events", Verb: "patch", Why: events},
	}
	if r.TLSFlags {
		// Without --tls-min-version and --tls-cipher-suites
		// (pkg/tls/tls.go on release-4.22: two gets, errors only
		// logged). The deployer renders both, but during an upgrade to
		// r it renders the older release's arguments, which have none
		// (clusterversion.go), for binaries that may be r's.
		ps = append(ps, Permission{Group: "config.openshift.io", Resource: "apiservers", Verb: "get", Name: APIServerName,
			Why: "machineset-controller started without the TLS flags (during an upgrade from a release without them, whose arguments the deployer renders until it completes) reads the TLS profile itself"})
	}
	return ps
}

// DeployerPermissions are the requests the deployer makes to render r that
// not every release needs.
func (r Release) DeployerPermissions() []Permission {
	if !r.TLSFlags {
		return nil
	}
	why := "the deployer renders the TLS flags from the APIServer's TLS profile and re-renders when it changes (tlsprofile.go; cached, limited by name)"
	return []Permission{
		{Group: "config.openshift.io", Resource: "apiservers", Verb: "list", Name: APIServerName, Why: why},
		{Group: "config.openshift.io", Resource: "apiservers", Verb: "watch", Name: APIServerName, Why: why},
	}
}
