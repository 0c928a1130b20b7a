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
		if !strings.Contains(notes, "# "+strings.TrimPrefix(image, "ghcr.io/appuio/machine-api-provider@")) || !strings.Contains(notes, "not signed") || strings.Contains(notes, "cosign") {
			t.Errorf("%s: the unsigned notes do not say how to verify by digest and sums alone:\n%s", version, notes)
		}
	}
	// Signed (make release-sign): the commands that verify the signatures
	// name the signer and the image by digest.
	notes, err := Notes(changelog, NotesOptions{Version: "v1.1.0", Image: image, Repository: "https://github.com/appuio/machine-api-provider",
		SignerIdentity: "releases@appuio.example", SignerIssuer: "https://github.com/login/oauth"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"cosign verify-blob --bundle SHA256SUMS.sigstore.json", "--certificate-identity 'releases@appuio.example' --certificate-oidc-issuer 'https://github.com/login/oauth' " + image} {
		if !strings.Contains(notes, s) {
			t.Errorf("the signed notes lack %q:\n%s", s, notes)
		}
	}
	if strings.Contains(notes, "not signed") {
		t.Errorf("the signed notes say they are not:\n%s", notes)
	}
	for _, bad := range []string{"v2.0.0", "1.1.0", "v1.1"} {
		if _, err := Notes(changelog, NotesOptions{Version: bad, Image: image}); err == nil {
			t.Errorf("%s: notes without an error", bad)
		}
	}
}

// TestChangelogOfTheRepository: CHANGELOG.md makes the notes of a
// pre-release (from [Unreleased]); every version section is dated; and the
// first release's notes read as a first release: its section (or, before
// it is cut, [Unreleased]) says what the provider is and has, never what
// "changed", was "removed" or "deprecated", nor how to upgrade, from states
// nobody could install. (A [0.1.0] once kept growing after its date, with
// Changed, Removed and Upgrading sections about unreleased code, while no
// release was cut.)
func TestChangelogOfTheRepository(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Notes(string(data), NotesOptions{Version: "v0.0.0-dev", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	headings := sectionHeading.FindAllStringSubmatch(string(data), -1)
	first := "Unreleased"
	for _, h := range headings {
		if h[1] == "Unreleased" {
			continue
		}
		if !regexp.MustCompile(`^## \[[0-9][^\]]*\] - \d{4}-\d{2}-\d{2}$`).MatchString(h[0]) {
			t.Errorf("CHANGELOG.md: %q: a release's section is `## [X.Y.Z] - YYYY-MM-DD`", h[0])
		}
		first = h[1]
	}
	body, ok := ChangelogSection(string(data), first)
	if !ok || strings.TrimSpace(body) == "" {
		t.Fatalf("CHANGELOG.md: the first release's section [%s] is empty", first)
	}
	for _, h := range []string{"### Changed", "### Removed", "### Deprecated", "### Upgrading", "### Fixed"} {
		if strings.Contains(body, h) {
			t.Errorf("CHANGELOG.md: the first release's section [%s] has %q: nothing was released before it to change", first, h)
		}
	}
}
