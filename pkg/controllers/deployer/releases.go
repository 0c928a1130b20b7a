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

// Release is one OpenShift minor release as the deployer renders for it.
type Release struct {
	// Minor is y of 4.y.
	Minor int
	// MigrationGate: how the machineset-controller takes
	// --feature-gates=MachineAPIMigration=false.
	MigrationGate MigrationGate
	// StatusWrite is the verb the machineset controller (MachineSet
	// status) and the nodelink controller (Machine status) write status
	// with: "update" up to 4.18 (Status().Update), "patch" from 4.19.
	StatusWrite string
	// Supported: the provider supports clusters of this release (4.16 to
	// 4.21). The others are known, so rendered right, but not tested.
	Supported bool
	// Matrix is the machine-api-operator module version `make matrix`
	// builds this release's controllers from, "" for a release another
	// era's run covers (MatrixEra). The Go module proxy serves these.
	Matrix string
	// MatrixEra is the release whose `make matrix` era covers this one:
	// the same flags and verbs as that era's binaries.
	MatrixEra int
}

// Releases are the known releases, oldest first. The eras `make matrix`
// runs: 4.16 (no --feature-gates, status by update), 4.18 (--feature-gates,
// status by update) and 4.21 (--feature-gates, status by patch); every
// other release has the flags and verbs of one of them.
var Releases = []Release{
	{Minor: 14, MigrationGate: GateAbsent, StatusWrite: "update", MatrixEra: 16},
	{Minor: 15, MigrationGate: GateAbsent, StatusWrite: "update", MatrixEra: 16},
	{Minor: 16, MigrationGate: GateAbsent, StatusWrite: "update", Supported: true, MatrixEra: 16,
		// the version openshift/machine-api-provider-aws pins on release-4.16
		Matrix: "v0.2.1-0.20240125175440-c9de8bda0dd1"},
	{Minor: 17, MigrationGate: GateSettable, StatusWrite: "update", Supported: true, MatrixEra: 18},
	{Minor: 18, MigrationGate: GateSettable, StatusWrite: "update", Supported: true, MatrixEra: 18,
		// the version openshift/machine-api-provider-aws pins on release-4.18
		Matrix: "v0.2.1-0.20240924110326-1efafa4a6615"},
	{Minor: 19, MigrationGate: GateSettable, StatusWrite: "patch", Supported: true, MatrixEra: 21},
	{Minor: 20, MigrationGate: GateSettable, StatusWrite: "patch", Supported: true, MatrixEra: 21},
	{Minor: 21, MigrationGate: GateSettable, StatusWrite: "patch", Supported: true, MatrixEra: 21,
		// the version go.mod pins (release-4.21)
		Matrix: "v0.2.1-0.20251115003740-026e9dff6a1c"},
}

// String is "4.y".
func (r Release) String() string { return fmt.Sprintf("4.%d", r.Minor) }

// Newest is the newest known release.
func Newest() Release { return Releases[len(Releases)-1] }

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
// ("4.16.23", "4.18.0-rc.1"; "" when unknown) gets, and how v fits.
func ForVersion(v string) (Release, Fit) {
	minor, ok := minorOf(v)
	if !ok {
		return Newest(), FitUnknown
	}
	if minor > Newest().Minor {
		return Newest(), FitNewer
	}
	if minor < Releases[0].Minor {
		return Releases[0], FitOlder
	}
	for _, r := range Releases {
		if r.Minor == minor {
			return r, FitKnown
		}
	}
	// a gap in the table: the closest older release's arguments
	best := Releases[0]
	for _, r := range Releases {
		if r.Minor < minor {
			best = r
		}
	}
	return best, FitKnown
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(\.|$|-|\+)`)

// minorOf returns y of a 4.y version, as an ordinal that also orders other
// majors: below every 4.y for 3.x and below, above for 5.x and above.
// False when v is no version.
func minorOf(v string) (int, bool) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return 0, false
	}
	x, errX := strconv.Atoi(m[1])
	y, errY := strconv.Atoi(m[2])
	if errX != nil || errY != nil {
		return 0, false
	}
	switch {
	case x < 4:
		return -1, true
	case x > 4:
		return 1 << 20, true
	}
	return y, true
}

// Container arguments per release. Only the machineset-controller's differ
// between releases today; the nodelink and machine-healthcheck controllers
// have taken the same flags since 4.14 (--namespace, --leader-elect*,
// --metrics-bind-address for the health check, klog's).

// machineSetArgs are the machineset-controller's arguments beyond the
// shared ones.
func (r Release) machineSetArgs() []string {
	var args []string
	if r.MigrationGate == GateSettable {
		// The provider takes no part in the migration to Cluster API:
		// pinned off so that a release enabling it by default does not
		// hand MachineSets to a Cluster API that is not there.
		args = append(args, "--feature-gates=MachineAPIMigration=false")
	}
	return args
}

// Describe says in a few words what the deployer renders for r, for the
// status and the docs.
func (r Release) Describe() string {
	switch r.MigrationGate {
	case GateAbsent:
		return "machineset-controller without --feature-gates"
	case GateLocked:
		return "machineset-controller without --feature-gates (MachineAPIMigration is locked)"
	default:
		return "machineset-controller with --feature-gates=MachineAPIMigration=false"
	}
}
