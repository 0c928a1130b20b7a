// Package config holds the manifests the provider is installed from (the
// kustomizations under this directory), embedded, so that the binary can
// render them itself: `machine-api-provider install-manifests` writes the
// overlay of a cloud into an OpenShift installer's directory without a
// kustomize binary and without a second copy of any manifest.
package config

import "embed"

// FS is this directory: every kustomization and manifest.
//
//go:embed crd default deployer overlays prometheus rbac webhook
var FS embed.FS
