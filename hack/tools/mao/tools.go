//go:build tools

// Package tools records the main packages built from this wrapper module so
// that `go mod tidy` keeps their dependencies: the three controllers of the
// machine-api-operator's image that the controllers Deployment runs.
package tools

import (
	_ "github.com/openshift/machine-api-operator/cmd/machine-healthcheck"
	_ "github.com/openshift/machine-api-operator/cmd/machineset"
	_ "github.com/openshift/machine-api-operator/cmd/nodelink-controller"
)
