package deployer

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

func TestForVersion(t *testing.T) {
	newest, oldest := Newest().String(), Releases[0].String()
	for _, tc := range []struct {
		version string
		release string
		fit     Fit
	}{
		{"4.16.23", "4.16", FitKnown},
		{"4.16.0-rc.3", "4.16", FitKnown},
		{"4.18.0-0.nightly-2025-01-01-000000", "4.18", FitKnown},
		{"4.21.4", "4.21", FitKnown},
		{"v4.17.9", "4.17", FitKnown},
		{"4.14.1", "4.14", FitKnown},
		{"4.22.0", "4.22", FitKnown},
		{"4.23.1", "4.23", FitKnown},
		{"5.0.0", "5.0", FitKnown},
		{"5.0.0-rc.2", "5.0", FitKnown},
		{"v5.0.3", "5.0", FitKnown},
		{"5.1.0", newest, FitNewer},
		{"5.12.1", newest, FitNewer},
		{"6.0.0", newest, FitNewer},
		// 4.24 never comes (4.23 is the last 4.y); were it to, it would
		// be the closest older release's, 4.23
		{"4.24.0", "4.23", FitKnown},
		{"4.13.40", oldest, FitOlder},
		{"3.11.0", oldest, FitOlder},
		{"", newest, FitUnknown},
		{"latest", newest, FitUnknown},
		{"4", newest, FitUnknown},
	} {
		rel, fit := ForVersion(tc.version)
		if rel.String() != tc.release || fit != tc.fit {
			t.Errorf("ForVersion(%q) = %s, %s; want %s, %s", tc.version, rel, fit, tc.release, tc.fit)
		}
	}
}

// The table is what the rest relies on: oldest first without repeats,
// every release covered by a matrix era that names a module version or
// said to be table only, verbs the RBAC knows, and flags that are only ever
// added from one release to the next (an upgrade renders the older
// release's flags for either release's binaries, clusterversion.go).
func TestReleaseTable(t *testing.T) {
	eras := map[string]Release{}
	for _, r := range Releases {
		if r.Matrix != "" {
			eras[r.String()] = r
		}
	}
	for i, r := range Releases {
		if i > 0 && !Releases[i-1].before(r) {
			t.Errorf("%s follows %s: oldest first, no repeats", r, Releases[i-1])
		}
		if r.StatusWrite != "update" && r.StatusWrite != "patch" {
			t.Errorf("%s: status write %q", r, r.StatusWrite)
		}
		if r.EventsGroup != "" && r.EventsGroup != "events.k8s.io" {
			t.Errorf("%s: events group %q", r, r.EventsGroup)
		}
		if r.Autoscaler == "" || len(r.Flags.MachineSet) == 0 || len(r.Flags.KubeRBACProxy) == 0 {
			t.Errorf("%s: autoscaler or flags not recorded", r)
		}
		if r.MatrixEra == "" {
			if r.Matrix != "" {
				t.Errorf("%s has a module version but no era", r)
			}
		} else {
			era, ok := eras[r.MatrixEra]
			switch {
			case !ok:
				t.Errorf("%s: matrix era %s has no module version", r, r.MatrixEra)
			case era.MigrationGate != r.MigrationGate || era.StatusWrite != r.StatusWrite || era.TLSFlags != r.TLSFlags ||
				era.EventsGroup != r.EventsGroup || !slices.Equal(era.Flags.MachineSet, r.Flags.MachineSet):
				t.Errorf("%s differs from its matrix era %s: the era's run does not cover it", r, era)
			}
		}
		if i == 0 {
			continue
		}
		prev := Deployment(Spec{Namespace: "ns", Release: Releases[i-1]})
		cur := Deployment(Spec{Namespace: "ns", Release: r})
		for _, c := range prev.Spec.Template.Spec.Containers {
			next := findContainer(t, cur.Spec.Template.Spec.Containers, c.Name)
			flags, _ := r.Flags.Of(c.Name)
			for _, a := range c.Args {
				// a flag of the older release the newer binary still
				// defines is fine with another value (the TLS flags)
				if !slices.Contains(next.Args, a) && r.MigrationGate != GateLocked && !slices.Contains(flags, flagName(a)) {
					t.Errorf("%s: %s drops %s of %s: an upgrade would hand the new binary a flag it may not know", c.Name, r, a, Releases[i-1])
				}
			}
		}
		for _, set := range [][2][]string{
			{Releases[i-1].Flags.MachineSet, r.Flags.MachineSet}, {Releases[i-1].Flags.NodeLink, r.Flags.NodeLink},
			{Releases[i-1].Flags.MachineHealthCheck, r.Flags.MachineHealthCheck}, {Releases[i-1].Flags.KubeRBACProxy, r.Flags.KubeRBACProxy},
		} {
			for _, f := range set[0] {
				if !slices.Contains(set[1], f) {
					t.Errorf("%s's binaries drop the flag %s of %s's: the older release's arguments would not run on them during an upgrade", r, f, Releases[i-1])
				}
			}
		}
	}
	if supportedRange() != "4.16 to 5.0" {
		t.Errorf("supported: %s", supportedRange())
	}
}

// flagName is the name of a rendered argument: "v" of "--v=3".
func flagName(arg string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name
}

// The release whose machine-api-operator go.mod pins is a row: the
// controllers make demo and make e2e run in-process are its.
func TestLibraryIsGoModsPin(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/openshift/machine-api-operator (\S+)`).FindSubmatch(data)
	if m == nil || string(m[1]) != libraryVersion {
		t.Fatalf("go.mod pins the machine-api-operator at %q, releases.go's libraryVersion is %q", m, libraryVersion)
	}
	if got := Library(); got.Matrix != libraryVersion {
		t.Errorf("Library() = %s", got)
	}
}

// Each release's machineset-controller gets --feature-gates only where its
// binary has the flag: up to 4.16 it stops at start on an unknown flag.
func TestMachineSetArgsPerRelease(t *testing.T) {
	for _, r := range Releases {
		d := Deployment(Spec{Namespace: "ns", Release: r})
		c := findContainer(t, d.Spec.Template.Spec.Containers, MachineSetContainer)
		has := slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--feature-gates") })
		want := r.MigrationGate == GateSettable
		if has != want {
			t.Errorf("%s: machineset-controller --feature-gates given: %t, want %t (%v)", r, has, want, c.Args)
		}
		if got := d.Annotations[ReleaseAnnotation]; got != r.String() {
			t.Errorf("%s: annotation %s = %q", r, ReleaseAnnotation, got)
		}
		// the other MAO containers take the same flags in every release
		for _, name := range []string{NodeLinkContainer, MachineHealthCheckContainer} {
			nc := findContainer(t, d.Spec.Template.Spec.Containers, name)
			if slices.ContainsFunc(nc.Args, func(a string) bool { return strings.HasPrefix(a, "--feature-gates") }) {
				t.Errorf("%s: %s gets --feature-gates: %v", r, name, nc.Args)
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
		{"4.14.9", true, "Known", []string{"not supported", "4.16 to 5.0"}},
		{"5.0.1", true, "Known", []string{"5.0.1", "--tls-min-version", "supported"}},
		{"5.1.0", false, "NewerThanKnown", []string{"5.1.0", "newest: 5.0", "flags of 5.0", "upgrade the provider"}},
		{"4.12.0", false, "OlderThanKnown", []string{"4.12.0", "oldest: 4.14"}},
		{"", false, "VersionUnknown", []string{"no ClusterVersion", "5.0"}},
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
