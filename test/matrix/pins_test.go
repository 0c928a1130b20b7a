package matrix

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// makefilePins reads the Makefile's MAO_<x>_<y>_VERSION pins by era
// ("4.16") and its default MATRIX_ERAS.
func makefilePins(t *testing.T) (map[string]string, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^MAO_(\d+)_(\d+)_VERSION\s*\?=\s*(\S+)\s*$`).FindAllStringSubmatch(string(data), -1) {
		pins[m[1]+"."+m[2]] = m[3]
	}
	eras := regexp.MustCompile(`(?m)^MATRIX_ERAS\s*\?=\s*(.*)$`).FindStringSubmatch(string(data))
	if eras == nil {
		t.Fatal("the Makefile sets no MATRIX_ERAS")
	}
	return pins, strings.Fields(eras[1])
}

// The eras `make matrix` builds and runs by default are the releases whose
// Matrix field names a version (pkg/controllers/deployer/releases.go, the
// one table of per-release facts), at those versions, and each era's
// module file in hack/tools/mao requires that version.
func TestMakefilePinsFollowReleases(t *testing.T) {
	pins, eras := makefilePins(t)
	var want []string
	for _, r := range deployer.Releases {
		if r.Matrix == "" {
			if pins[r.String()] != "" {
				t.Errorf("the Makefile pins MAO_%d_%d_VERSION, but releases.go names no Matrix version for %s", r.Major, r.Minor, r)
			}
			continue
		}
		want = append(want, r.String())
		if got := pins[r.String()]; got != r.Matrix {
			t.Errorf("%s: the Makefile pins the machine-api-operator at %q, releases.go (Matrix) at %q", r, got, r.Matrix)
		}
		mod, err := os.ReadFile(filepath.Join(repoRoot(t), "hack", "tools", "mao", "mao-"+r.String()+".mod"))
		if err != nil {
			t.Errorf("%s: %v", r, err)
			continue
		}
		m := regexp.MustCompile(`(?m)^\s*github\.com/openshift/machine-api-operator (\S+)`).FindSubmatch(mod)
		if m == nil || string(m[1]) != r.Matrix {
			t.Errorf("%s: hack/tools/mao/mao-%s.mod requires the machine-api-operator at %q, releases.go at %q", r, r, m, r.Matrix)
		}
	}
	if !slices.Equal(eras, want) {
		t.Errorf("the Makefile's MATRIX_ERAS are %v; releases.go's Matrix eras are %v", eras, want)
	}
	// every release of releases.go runs its own binaries, or is covered
	// by an era that does, or says that none does (table only)
	for _, r := range deployer.Releases {
		if r.MatrixEra != "" && !slices.Contains(want, r.MatrixEra) {
			t.Errorf("%s: MatrixEra %s is no era make matrix runs (%v)", r, r.MatrixEra, want)
		}
	}
}
