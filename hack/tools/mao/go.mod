// Wrapper module for the machine-api-operator's controllers of several
// OpenShift eras, which `make matrix` runs (test/matrix). This file only
// marks the module's root: each era's requirements are in its own module
// file, mao-<era>.mod (with mao-<era>.sum), built with -modfile, so that one
// package set (tools.go, webhooks/) builds against every era. Each pins
// github.com/openshift/machine-api-operator at the version the Makefile's
// MAO_<era>_VERSION names (and pkg/controllers/deployer/releases.go, the
// Matrix field) and repeats the operator's own replace directives.
//
// Bump an era: change the Makefile's pin and releases.go, then
//   GOFLAGS=-mod=mod go get -modfile=mao-4.16.mod github.com/openshift/machine-api-operator@<version>
//   go mod tidy -modfile=mao-4.16.mod
module github.com/appuio/machine-api-provider/hack/tools/mao

go 1.26.0
