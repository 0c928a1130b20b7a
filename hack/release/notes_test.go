package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const changelog = `# Changelog

All notable changes ... (Keep a Changelog).

## [Unreleased]

### Added

- Something new.

## [1.1.0] - 2025-03-01

### Fixed

- A fix.

## [v1.0.0] - 2025-01-31

### Added

- The first release.

[Unreleased]: https://example.com/compare/v1.1.0...HEAD
[1.1.0]: https://example.com/compare/v1.0.0...v1.1.0
`

// TestNotes: a release's notes are its section of the changelog (headed
// with or without the v), the image and how to install it; a pre-release
// without a section takes [Unreleased]; a release without one fails, as does
// a version that is not one.
func TestNotes(t *testing.T) {
	image := testImage
	for version, want := range map[string]string{
		"v1.1.0":      "- A fix.",
		"v1.0.0":      "- The first release.",
		"v0.0.0-dev":  "- Something new.",
		"v1.2.0-rc.1": "- Something new.",
	} {
		notes, err := Notes(changelog, NotesOptions{Version: version, Image: image, Repository: "https://github.com/appuio/machine-api-provider"})
		if err != nil {
			t.Errorf("%s: %v", version, err)
			continue
		}
		for _, s := range []string{"# machine-api-provider " + version, want, image,
			"oc apply -k 'https://github.com/appuio/machine-api-provider//config/overlays/cloudscale?ref=" + version + "'",
			"oc apply -f install-exoscale.yaml", "machine-api-provider-darwin-arm64", "sha256sum --ignore-missing -c SHA256SUMS",
			"skopeo copy --preserve-digests oci-archive:machine-api-provider.oci.tar docker://registry.example.com/appuio/machine-api-provider:" + version} {
			if !strings.Contains(notes, s) {
				t.Errorf("%s: the notes lack %q:\n%s", version, s, notes)
			}
		}
		if strings.Contains(notes, "[1.1.0]: https://") || (version != "v1.1.0" && strings.Contains(notes, "A fix.")) {
			t.Errorf("%s: the notes hold another section:\n%s", version, notes)
		}
	}
	for _, bad := range []string{"v2.0.0", "1.1.0", "v1.1"} {
		if _, err := Notes(changelog, NotesOptions{Version: bad, Image: image}); err == nil {
			t.Errorf("%s: notes without an error", bad)
		}
	}
}

// TestChangelogOfTheRepository: CHANGELOG.md makes the notes of a
// pre-release (from [Unreleased], empty right after a release) and of
// v0.1.0, the release cut, with its date.
func TestChangelogOfTheRepository(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Notes(string(data), NotesOptions{Version: "v0.0.0-dev", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	if _, err := Notes(string(data), NotesOptions{Version: "v0.1.0", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^## \[0\.1\.0\] - \d{4}-\d{2}-\d{2}$`).Match(data) {
		t.Error("CHANGELOG.md has no dated section ## [0.1.0] - YYYY-MM-DD")
	}
}
