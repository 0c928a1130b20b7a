// Package config holds the manifests the provider is installed from (the
// kustomizations under this directory), embedded, so that the binary can
// render them itself: `machine-api-provider install-manifests` writes the
// overlay of a cloud into an OpenShift installer's directory without a
// kustomize binary and without a second copy of any manifest.
package config

import "embed"

// FS is this directory: every kustomization and manifest but image/ (the
// release's pin of the image, which the binary must not embed: the image
// built at a release's tag is the one the pin names) and olm/ (the bundle's
// description). Renderers supply image/ themselves (installmanifests).
//
//go:embed crd default deployer networkpolicy overlays prometheus provider-image-env rbac webhook
var FS embed.FS
