//go:build tools

// Package tools records the main package built from this wrapper module so
// that `go mod tidy` keeps its dependencies.
package tools

import (
	_ "github.com/openshift/cluster-autoscaler-operator/cmd/manager"
)
