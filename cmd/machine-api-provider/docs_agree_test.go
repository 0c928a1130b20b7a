package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/controllers/capacity"
	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// TestDocsAgreeOnSupportedReleases: every "OpenShift x.y to x.y" of the
// README, the changelog and docs/ is the range of releases.go's supported
// releases, and the README names it too: the changelog once said 4.14 to
// 4.21 while support.md said 4.16 to 4.21. The range may cross a major
// release (4.16 to 5.0).
func TestDocsAgreeOnSupportedReleases(t *testing.T) {
	root := repoRoot(t)
	var supported []deployer.Release
	for _, r := range deployer.Releases {
		if r.Supported {
			supported = append(supported, r)
		}
	}
	if len(supported) == 0 {
		t.Fatal("releases.go supports no release")
	}
	order := func(a, b deployer.Release) int {
		return cmp.Or(cmp.Compare(a.Major, b.Major), cmp.Compare(a.Minor, b.Minor))
	}
	want := fmt.Sprintf("%s to %s", slices.MinFunc(supported, order), slices.MaxFunc(supported, order))
	files := []string{"README.md", "CHANGELOG.md"}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	claims := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`OpenShift (\d+\.\d+ to \d+\.\d+)`).FindAllStringSubmatch(string(b), -1) {
			claims++
			if m[1] != want {
				t.Errorf("%s says OpenShift %s; releases.go supports %s", f, m[1], want)
			}
		}
		if f == "README.md" && !strings.Contains(string(b), want) {
			t.Errorf("README.md does not name the supported releases, %s", want)
		}
	}
	if claims == 0 {
		t.Error("no document says which OpenShift releases are supported")
	}
}

// TestRunbooksNameWhatTheCodeRecords: the events a runbook filters for
// (--field-selector reason=…) are those its alert's failures record, and
// every call a runbook names as an alert's `operation` label is one the
// clients make. The PermissionRefused runbook once looked for
// CredentialsRefused and named an operation that does not exist.
func TestRunbooksNameWhatTheCodeRecords(t *testing.T) {
	root := repoRoot(t)
	// The event reason a refusal of each kind is recorded with (the
	// actuator's and the capacity publisher's).
	reasons := map[string]string{
		"MachineAPIProviderPermissionRefused.md":  capacity.ReasonPermissionDenied,
		"MachineAPIProviderCredentialsRefused.md": capacity.ReasonCredentialsRefused,
	}
	// Calls of one zone's endpoint (zcall) name their operation too.
	ops := map[string]bool{}
	code, _ := filepath.Glob(filepath.Join(root, "pkg", "cloud", "*", "*.go"))
	for _, f := range code {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\.z?call\(ctx, (?:[a-z.]+, )?"([a-z]+\.[a-z]+)"`).FindAllStringSubmatch(string(b), -1) {
			ops[m[1]] = true
		}
	}
	if len(ops) < 10 {
		t.Fatalf("found only %d calls in pkg/cloud", len(ops))
	}
	runbooks, _ := filepath.Glob(filepath.Join(root, "docs", "runbooks", "*.md"))
	for _, f := range runbooks {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		if want, ok := reasons[name]; ok {
			for _, m := range regexp.MustCompile(`reason=([A-Za-z]+)`).FindAllStringSubmatch(string(b), -1) {
				if m[1] != want {
					t.Errorf("%s filters for reason=%s; the refusals it is about are recorded as %s", name, m[1], want)
				}
			}
			if !strings.Contains(string(b), "reason="+want) {
				t.Errorf("%s does not show the %s events", name, want)
			}
		}
		for _, m := range regexp.MustCompile("`([a-z-]+\\.(?:list|get|create|update|delete|attach|evict))`").FindAllStringSubmatch(string(b), -1) {
			if !ops[m[1]] {
				t.Errorf("%s names the operation %s, which no client calls", name, m[1])
			}
		}
	}
}
