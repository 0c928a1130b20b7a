package deployer

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

func TestForVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		minor   int
		fit     Fit
	}{
		{"4.16.23", 16, FitKnown},
		{"4.16.0-rc.3", 16, FitKnown},
		{"4.18.0-0.nightly-2025-01-01-000000", 18, FitKnown},
		{"4.21.4", 21, FitKnown},
		{"v4.17.9", 17, FitKnown},
		{"4.14.1", 14, FitKnown},
		{"4.22.0", Newest().Minor, FitNewer},
		{"4.30.1", Newest().Minor, FitNewer},
		{"5.0.0", Newest().Minor, FitNewer},
		{"4.13.40", Releases[0].Minor, FitOlder},
		{"3.11.0", Releases[0].Minor, FitOlder},
		{"", Newest().Minor, FitUnknown},
		{"latest", Newest().Minor, FitUnknown},
		{"4", Newest().Minor, FitUnknown},
	} {
		rel, fit := ForVersion(tc.version)
		if rel.Minor != tc.minor || fit != tc.fit {
			t.Errorf("ForVersion(%q) = 4.%d, %s; want 4.%d, %s", tc.version, rel.Minor, fit, tc.minor, tc.fit)
		}
	}
}

// The table is what the rest relies on: oldest first without repeats,
// every release covered by a matrix era that names a module version, verbs
// the RBAC knows, and flags that are only ever added from one release to
// the next (an upgrade renders the older release's flags for either
// release's binaries, clusterversion.go).
func TestReleaseTable(t *testing.T) {
	eras := map[int]Release{}
	for _, r := range Releases {
		if r.Matrix != "" {
			eras[r.Minor] = r
		}
	}
	for i, r := range Releases {
		if i > 0 && r.Minor <= Releases[i-1].Minor {
			t.Errorf("4.%d follows 4.%d: oldest first, no repeats", r.Minor, Releases[i-1].Minor)
		}
		if r.StatusWrite != "update" && r.StatusWrite != "patch" {
			t.Errorf("4.%d: status write %q", r.Minor, r.StatusWrite)
		}
		era, ok := eras[r.MatrixEra]
		if !ok {
			t.Errorf("4.%d: matrix era 4.%d has no module version", r.Minor, r.MatrixEra)
			continue
		}
		if era.MigrationGate != r.MigrationGate || era.StatusWrite != r.StatusWrite {
			t.Errorf("4.%d differs from its matrix era 4.%d: the era's run does not cover it", r.Minor, era.Minor)
		}
		if i == 0 {
			continue
		}
		prev := Deployment(Spec{Namespace: "ns", Release: Releases[i-1]})
		cur := Deployment(Spec{Namespace: "ns", Release: r})
		for _, c := range prev.Spec.Template.Spec.Containers {
			next := findContainer(t, cur.Spec.Template.Spec.Containers, c.Name)
			for _, a := range c.Args {
				if !slices.Contains(next.Args, a) && r.MigrationGate != GateLocked {
					t.Errorf("%s: 4.%d drops %s of 4.%d: an upgrade would hand the new binary a flag it may not know", c.Name, r.Minor, a, Releases[i-1].Minor)
				}
			}
		}
	}
	if supportedRange() != "4.16 to 4.21" {
		t.Errorf("supported: %s", supportedRange())
	}
}

// Each release's machineset-controller gets --feature-gates only where its
// binary has the flag: up to 4.16 it stops at start on an unknown flag.
func TestMachineSetArgsPerRelease(t *testing.T) {
	for _, r := range Releases {
		d := Deployment(Spec{Namespace: "ns", Release: r})
		c := findContainer(t, d.Spec.Template.Spec.Containers, MachineSetContainer)
		has := slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--feature-gates") })
		want := r.Minor >= 17
		if has != want {
			t.Errorf("4.%d: machineset-controller --feature-gates given: %t, want %t (%v)", r.Minor, has, want, c.Args)
		}
		if got := d.Annotations[ReleaseAnnotation]; got != r.String() {
			t.Errorf("4.%d: annotation %s = %q", r.Minor, ReleaseAnnotation, got)
		}
		// the other MAO containers take the same flags in every release
		for _, name := range []string{NodeLinkContainer, MachineHealthCheckContainer} {
			nc := findContainer(t, d.Spec.Template.Spec.Containers, name)
			if slices.ContainsFunc(nc.Args, func(a string) bool { return strings.HasPrefix(a, "--feature-gates") }) {
				t.Errorf("4.%d: %s gets --feature-gates: %v", r.Minor, name, nc.Args)
			}
		}
	}
	if d := Deployment(Spec{Namespace: "ns"}); d.Annotations[ReleaseAnnotation] != Newest().String() {
		t.Errorf("no release: rendered for %s, want the newest known", d.Annotations[ReleaseAnnotation])
	}
}

func TestRenderVersion(t *testing.T) {
	h := func(v string, state configv1.UpdateState) configv1.UpdateHistory {
		return configv1.UpdateHistory{Version: v, State: state}
	}
	for _, tc := range []struct {
		name    string
		desired string
		history []configv1.UpdateHistory
		want    string
	}{
		{"installed", "4.16.3", []configv1.UpdateHistory{h("4.16.3", configv1.CompletedUpdate)}, "4.16.3"},
		{"installing", "4.16.3", []configv1.UpdateHistory{h("4.16.3", configv1.PartialUpdate)}, "4.16.3"},
		{"upgrading: the older until done", "4.17.1",
			[]configv1.UpdateHistory{h("4.17.1", configv1.PartialUpdate), h("4.16.3", configv1.CompletedUpdate)}, "4.16.3"},
		{"upgraded", "4.17.1",
			[]configv1.UpdateHistory{h("4.17.1", configv1.CompletedUpdate), h("4.16.3", configv1.CompletedUpdate)}, "4.17.1"},
		{"upgrade retargeted mid-way", "4.18.2", []configv1.UpdateHistory{
			h("4.18.2", configv1.PartialUpdate), h("4.17.1", configv1.PartialUpdate), h("4.16.3", configv1.CompletedUpdate), h("4.15.9", configv1.CompletedUpdate),
		}, "4.16.3"},
		{"rolled back", "4.16.3",
			[]configv1.UpdateHistory{h("4.16.3", configv1.PartialUpdate), h("4.17.1", configv1.CompletedUpdate)}, "4.16.3"},
		{"desired only", "4.19.0", nil, "4.19.0"},
		{"nothing", "", nil, ""},
	} {
		cv := &configv1.ClusterVersion{}
		cv.Status.Desired.Version = tc.desired
		cv.Status.History = tc.history
		if got := renderVersion(cv); got != tc.want {
			t.Errorf("%s: renderVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestReleaseCondition(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
		reason  string
		says    []string
	}{
		{"4.16.3", true, "Known", []string{"4.16.3", "without --feature-gates", "supported"}},
		{"4.14.9", true, "Known", []string{"not supported", "4.16 to 4.21"}},
		{"4.23.0", false, "NewerThanKnown", []string{"4.23.0", "newest: 4.21", "flags of 4.21", "upgrade the provider"}},
		{"4.12.0", false, "OlderThanKnown", []string{"4.12.0", "oldest: 4.14"}},
		{"", false, "VersionUnknown", []string{"no ClusterVersion", "4.21"}},
	} {
		rel, fit := ForVersion(tc.version)
		ok, reason, msg := releaseCondition(rel, fit, tc.version)
		if ok != tc.ok || reason != tc.reason {
			t.Errorf("%q: %t %s, want %t %s", tc.version, ok, reason, tc.ok, tc.reason)
		}
		for _, s := range tc.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%q: message %q does not say %q", tc.version, msg, s)
			}
		}
	}
}
