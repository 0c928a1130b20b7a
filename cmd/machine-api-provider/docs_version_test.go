package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestDocCommandsTakeTheVersionFromOneVariable: no shell command of the
// README or the docs names a release itself; each takes it from the one
// variable its page sets (VERSION=…, PREVIOUS=… for the way back), so that
// a reader installs one release throughout, and a release of their own
// (make release) with the same commands. Comments may name one.
func TestDocCommandsTakeTheVersionFromOneVariable(t *testing.T) {
	release := regexp.MustCompile(`\bv\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?\b`)
	setting := regexp.MustCompile(`^\s*(VERSION|PREVIOUS)=v`)
	shell := regexp.MustCompile("(?s)```sh\n(.*?)```")
	checked := 0
	for _, d := range docFiles(t, repoRoot(t)) {
		for _, block := range shell.FindAllStringSubmatch(d.text, -1) {
			for _, line := range strings.Split(block[1], "\n") {
				code := line
				if i := strings.Index(code, " #"); i >= 0 {
					code = code[:i]
				}
				if strings.HasPrefix(strings.TrimSpace(code), "#") || setting.MatchString(code) {
					continue
				}
				checked++
				if v := release.FindString(code); v != "" {
					t.Errorf("%s: a command names the release %s itself; take it from $VERSION:\n  %s", d.path, v, line)
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("checked only %d command lines", checked)
	}
}

// TestUpgradeNotesShowBeforeAndAfter: docs/upgrading.md has notes for each
// release (a `### vX.Y.Z` under "Per-release notes"), and each change they
// ask for by hand shows the YAML before and after, both valid YAML.
func TestUpgradeNotesShowBeforeAndAfter(t *testing.T) {
	var doc string
	for _, d := range docFiles(t, repoRoot(t)) {
		if d.path == "docs/upgrading.md" {
			doc = d.text
		}
	}
	_, notes, ok := strings.Cut(doc, "\n## Per-release notes\n")
	if !ok {
		t.Fatal(`docs/upgrading.md has no "## Per-release notes"`)
	}
	if i := strings.Index(notes, "\n## "); i >= 0 {
		notes = notes[:i]
	}
	releases := regexp.MustCompile(`(?m)^### (v\d+\.\d+\.\d+)$`).FindAllStringSubmatchIndex(notes, -1)
	if len(releases) == 0 {
		t.Fatal("no release has notes (### vX.Y.Z)")
	}
	pair := regexp.MustCompile("(?s)Before[^\n]*:\n\n```yaml\n(.*?)```\n\nAfter:\n\n```yaml\n(.*?)```")
	for i, r := range releases {
		end := len(notes)
		if i+1 < len(releases) {
			end = releases[i+1][0]
		}
		section := notes[r[0]:end]
		name := notes[r[2]:r[3]]
		pairs := pair.FindAllStringSubmatch(section, -1)
		if len(pairs) == 0 && !strings.Contains(section, "nothing by hand") {
			t.Errorf("%s: neither a Before/After YAML pair nor \"nothing by hand\"", name)
		}
		if n := strings.Count(section, "```yaml"); n != 2*len(pairs) {
			t.Errorf("%s: %d YAML blocks, %d of them in Before/After pairs", name, n, 2*len(pairs))
		}
		for _, p := range pairs {
			for _, y := range p[1:] {
				var v map[string]any
				if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(y)), 4096).Decode(&v); err != nil || len(v) == 0 {
					t.Errorf("%s: not YAML (%v):\n%s", name, err, y)
				}
			}
		}
	}
}
