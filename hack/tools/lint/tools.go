//go:build tools

// Package tools records the main packages built from this wrapper module so
// that `go mod tidy` keeps their dependencies.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
)
