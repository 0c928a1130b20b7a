package deployer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// The support matrix in docs/support.md is rendered from Releases: the doc
// cannot say other than what the deployer does.
const (
	supportBegin = "<!-- BEGIN support matrix: rendered from pkg/controllers/deployer/releases.go; TestSupportDocMatchesReleases checks it -->"
	supportEnd   = "<!-- END support matrix -->"
)

// supportTable is the support matrix as docs/support.md shows it.
func supportTable() string {
	var b strings.Builder
	b.WriteString("| OpenShift | cloudscale.ch | Exoscale | How it is tested | The deployer renders | Status writes of nodelink and machineset (RBAC) | Events of machineset and machine-healthcheck (RBAC) | OpenShift's autoscaler sets a MachineSet's size (to 0 too) |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	oldest, newest := deployer.Releases[0], deployer.Newest()
	fmt.Fprintf(&b, "| older than %s | no | no | — | %s's arguments; `ReleaseKnown` False, `%s` | — | — | — |\n", oldest, oldest, deployer.FitOlder)
	for _, r := range deployer.Releases {
		support := "no (known)"
		if r.Supported {
			support = "yes"
		}
		var tested string
		switch {
		case r.Matrix != "":
			tested = fmt.Sprintf("`make matrix` era %s: its own controllers, machine-api-operator `%s`, on both clouds", r, r.Matrix)
		case r.MatrixEra != "":
			tested = fmt.Sprintf("same flags and verbs as the %s era", r.MatrixEra)
		default:
			tested = "table only: every rendered flag checked against the flags its binaries define, its permissions against `config/rbac`"
			if r.Supported {
				// said in the matrix itself, not only in the prose below
				support = "yes (not run)"
			}
		}
		events := "core `events`"
		if r.EventsGroup != "" {
			events = "`" + r.EventsGroup + "` `events`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | `%s` | %s | %s |\n", r, support, support, tested, r.Describe(), r.StatusWrite, events, r.Autoscaler.Describe())
	}
	fmt.Fprintf(&b, "| newer than %s | no | no | — | %s's arguments; `ReleaseKnown` False, `%s` | — | — | — |\n", newest, newest, deployer.FitNewer)
	return b.String()
}

func TestSupportDocMatchesReleases(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "support.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	_, rest, ok := strings.Cut(doc, supportBegin+"\n")
	table, _, ok2 := strings.Cut(rest, supportEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/support.md lacks the markers %q and %q around its support matrix", supportBegin, supportEnd)
	}
	if want := supportTable(); table != want {
		t.Errorf("docs/support.md's support matrix differs from releases.go; put this between its markers:\n%s", want)
	}
}
