package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/blang/semver/v4"
)

// NotesOptions say what release the notes are for.
type NotesOptions struct {
	// Version is the release, vX.Y.Z.
	Version string
	// Image is the provider's image by digest.
	Image string
	// Repository is the repository's URL, for the install commands.
	Repository string
	// SignerIdentity and SignerIssuer, when set, are the identity (an
	// email, or a CI workflow's URL) and OIDC issuer whose Sigstore
	// certificate signs SHA256SUMS and the image (make release-sign):
	// the notes give the commands that verify them.
	SignerIdentity, SignerIssuer string
}

// sectionHeading is a Keep a Changelog version heading: "## [1.2.3] -
// 2025-01-31", "## [v1.2.3]", "## [Unreleased]".
var sectionHeading = regexp.MustCompile(`(?m)^## \[([^\]]+)\].*$`)

// ChangelogSection returns the body of the section of changelog whose
// heading names version (with or without its v).
func ChangelogSection(changelog, version string) (string, bool) {
	want := strings.TrimPrefix(version, "v")
	headings := sectionHeading.FindAllStringSubmatchIndex(changelog, -1)
	for i, h := range headings {
		if !strings.EqualFold(strings.TrimPrefix(changelog[h[2]:h[3]], "v"), want) {
			continue
		}
		end := len(changelog)
		if i+1 < len(headings) {
			end = headings[i+1][0]
		}
		// Link references ([1.2.3]: https://...) close the file.
		body := changelog[h[1]:end]
		if j := regexp.MustCompile(`(?m)^\[[^\]]+\]: `).FindStringIndex(body); j != nil {
			body = body[:j[0]]
		}
		return strings.TrimSpace(body), true
	}
	return "", false
}

// Notes are the release notes of o.Version: its section of changelog, or
// for a pre-release without one (v0.0.0-dev) the Unreleased section, and
// the commands that install it. A release proper must have its section:
// CHANGELOG.md is where the notes come from.
func Notes(changelog string, o NotesOptions) (string, error) {
	v, err := semver.Parse(strings.TrimPrefix(o.Version, "v"))
	if err != nil || !strings.HasPrefix(o.Version, "v") {
		return "", fmt.Errorf("version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE]", o.Version)
	}
	if o.Image == "" {
		return "", errors.New("no image")
	}
	body, ok := ChangelogSection(changelog, o.Version)
	source := o.Version
	if !ok {
		if len(v.Pre) == 0 {
			return "", fmt.Errorf("no section for %s: move the entries of [Unreleased] under a heading `## [%s] - YYYY-MM-DD` (Keep a Changelog) and commit that before the release", o.Version, v)
		}
		if body, ok = ChangelogSection(changelog, "Unreleased"); !ok {
			return "", fmt.Errorf("no section for %s and no [Unreleased] section", o.Version)
		}
		source = "Unreleased"
	}
	switch {
	case body == "" && source == "Unreleased":
		// A pre-release right after a release.
		body = "No change since the last release."
	case body == "":
		return "", fmt.Errorf("the section [%s] is empty", source)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# machine-api-provider %s\n\n", o.Version)
	if source != o.Version {
		fmt.Fprintf(&b, "A pre-release: the changes not released yet (CHANGELOG.md, [Unreleased]).\n\n")
	}
	fmt.Fprintf(&b, "%s\n\n", body)
	fmt.Fprintf(&b, `## Image

%[1]s

## Installing

Needs nothing but oc, logged in as a cluster admin (docs/install.md, docs/exoscale.md; upgrading
from an earlier release: docs/upgrading.md). The manifests name the image above by digest.

    # cloudscale.ch
    oc apply -k '%[2]s//config/overlays/cloudscale?ref=%[3]s'
    # or, from this release's files
    oc apply -f install-cloudscale.yaml

    # Exoscale
    oc apply -k '%[2]s//config/overlays/exoscale?ref=%[3]s'
    oc apply -f install-exoscale.yaml

From OperatorHub: the catalog of this release (catalog/) lists the packages
machine-api-provider-cloudscale and machine-api-provider-exoscale (docs/install.md, "From
OperatorHub").

The SBOM of the image (CycloneDX) is machine-api-provider.cdx.json.

## The command-line tool

adopt, install-manifests and uninstall run on the admin's machine, without Go:
machine-api-provider-linux-amd64, machine-api-provider-linux-arm64 and
machine-api-provider-darwin-arm64. Check the one you take against SHA256SUMS:

    sha256sum --ignore-missing -c SHA256SUMS      # macOS: shasum -a 256 --ignore-missing -c SHA256SUMS
    install -m 0755 machine-api-provider-linux-amd64 ~/bin/machine-api-provider
    machine-api-provider --version                # %[3]s

## The image in your own registry

machine-api-provider.oci.tar is the image as an OCI archive. One command copies it, its digest
unchanged, so that the manifests install it from there with only the repository replaced:

    skopeo copy --preserve-digests oci-archive:machine-api-provider.oci.tar docker://registry.example.com/appuio/machine-api-provider:%[3]s
    sed 's|%[4]s@|registry.example.com/appuio/machine-api-provider@|' install-cloudscale.yaml | oc apply -f -

## Verifying

SHA256SUMS lists every file of the release (sha256sum -c above). The image is named by its digest
everywhere, so what a cluster pulls is exactly what was built; the registry says the same:

    skopeo inspect --format '{{.Digest}}' docker://%[4]s:%[3]s    # %[5]s

Anyone can build it again from the tag and get that digest (docs/releasing.md):

    git clone --branch %[3]s %[2]s && cd machine-api-provider && make image
    cat _output/machine-api-provider.oci.tar.digest
`, o.Image, o.Repository, o.Version, imageRepo(o.Image), imageDigest(o.Image))
	if o.SignerIdentity == "" {
		b.WriteString("\nThis release is not signed: check it by SHA256SUMS and the digest.\n")
		return b.String(), nil
	}
	fmt.Fprintf(&b, `
SHA256SUMS and the image are signed with Sigstore's cosign (keyless: a certificate for %[1]s from
%[2]s, logged in Sigstore's public transparency log). With cosign:

    cosign verify-blob --bundle SHA256SUMS.sigstore.json \
        --certificate-identity '%[1]s' --certificate-oidc-issuer '%[2]s' SHA256SUMS
    cosign verify --certificate-identity '%[1]s' --certificate-oidc-issuer '%[2]s' %[3]s
    cosign verify-attestation --type cyclonedx \
        --certificate-identity '%[1]s' --certificate-oidc-issuer '%[2]s' %[3]s    # the SBOM, attested
`, o.SignerIdentity, o.SignerIssuer, o.Image)
	return b.String(), nil
}

// imageDigest is the digest of an image reference by digest.
func imageDigest(image string) string {
	if _, d, ok := strings.Cut(image, "@"); ok {
		return d
	}
	return ""
}

// imageRepo is an image reference without its digest or tag.
func imageRepo(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		return image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}
