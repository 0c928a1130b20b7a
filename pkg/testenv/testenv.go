// Package testenv starts a throwaway Kubernetes control plane (etcd and
// kube-apiserver) for tests, using controller-runtime's envtest and the
// binaries `make tools` builds into bin/.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AssetsEnv names the directory holding kube-apiserver and etcd. The
// Makefile sets it to the repository's bin/; when unset, <repo root>/bin is
// used.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Option changes the control plane Start starts.
type Option func(*envtest.Environment)

// WithCRDs installs the CRDs of these files or directories.
func WithCRDs(paths ...string) Option {
	return func(env *envtest.Environment) {
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, paths...)
		env.ErrorIfCRDPathMissing = true
	}
}

// WithMachineAPI installs the machine.openshift.io CRDs (Machine,
// MachineSet, MachineHealthCheck) as the openshift/api module in go.mod
// defines them.
func WithMachineAPI(t testing.TB) Option {
	t.Helper()
	return WithCRDs(MachineAPICRDs(t)...)
}

// MachineAPICRDs returns the machine.openshift.io CRD manifests of the
// openshift/api module version in go.mod, from the module cache.
func MachineAPICRDs(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(openShiftAPIDir(t), "machine", "v1beta1", "zz_generated.crd-manifests")
	return []string{
		filepath.Join(dir, "0000_10_machine-api_01_machines-Default.crd.yaml"),
		filepath.Join(dir, "0000_10_machine-api_01_machinesets-Default.crd.yaml"),
		filepath.Join(dir, "0000_10_machine-api_01_machinehealthchecks.crd.yaml"),
	}
}

// ProxyCRD returns the config.openshift.io Proxy CRD manifest (the
// cluster-wide proxy, proxies.config.openshift.io/cluster) of the
// openshift/api module version in go.mod, from the module cache.
func ProxyCRD(t testing.TB) string {
	t.Helper()
	return filepath.Join(openShiftAPIDir(t), "config", "v1", "zz_generated.crd-manifests", "0000_03_config-operator_01_proxies.crd.yaml")
}

// ClusterVersionCRD returns the config.openshift.io ClusterVersion CRD
// manifest (clusterversions.config.openshift.io/version: the cluster's
// OpenShift release) of the openshift/api module version in go.mod.
func ClusterVersionCRD(t testing.TB) string {
	t.Helper()
	return filepath.Join(openShiftAPIDir(t), "config", "v1", "zz_generated.crd-manifests",
		"0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml")
}

// InfrastructureCRD and DNSCRD return the config.openshift.io
// Infrastructure and DNS CRD manifests (infrastructures/cluster: the
// platform; dnses/cluster: the base domain, both read by the
// machine-api-operator's webhooks) of the openshift/api module version in
// go.mod.
func InfrastructureCRD(t testing.TB) string {
	t.Helper()
	return filepath.Join(openShiftAPIDir(t), "config", "v1", "zz_generated.crd-manifests",
		"0000_10_config-operator_01_infrastructures-Default.crd.yaml")
}

// DNSCRD: see InfrastructureCRD.
func DNSCRD(t testing.TB) string {
	t.Helper()
	return filepath.Join(openShiftAPIDir(t), "config", "v1", "zz_generated.crd-manifests", "0000_10_config-operator_01_dnses.crd.yaml")
}

// APIServerCRD returns the config.openshift.io APIServer CRD manifest
// (apiservers.config.openshift.io/cluster: the cluster's TLS profile, which
// the machine-api-operator's controllers read from 4.22 and the deployer
// renders their TLS flags from) of the openshift/api module version in
// go.mod, the Default feature set's.
func APIServerCRD(t testing.TB) string {
	t.Helper()
	return filepath.Join(openShiftAPIDir(t), "config", "v1", "zz_generated.crd-manifests",
		"0000_10_config-operator_01_apiservers-Default.crd.yaml")
}

// MachineConfigurationCRD returns the operator.openshift.io
// MachineConfiguration CRD manifest of the openshift/api module version in
// go.mod: the TechPreviewNoUpgrade feature set's, which has
// spec.bootImageSkewEnforcement (the gate BootImageSkewEnforcement, on by
// default from OpenShift 4.22; this module version's Default manifest
// predates that).
func MachineConfigurationCRD(t testing.TB) string {
	t.Helper()
	return filepath.Join(openShiftAPIDir(t), "operator", "v1", "zz_generated.crd-manifests",
		"0000_80_machine-config_01_machineconfigurations-TechPreviewNoUpgrade.crd.yaml")
}

// openShiftAPIDir is the openshift/api module's directory in the module
// cache.
func openShiftAPIDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatalf("testenv: locating the openshift/api module: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// Start starts etcd and kube-apiserver from the assets directory and returns
// a rest.Config and a client for it. The control plane is stopped in
// t.Cleanup. Start fails the test if the binaries are missing.
func Start(t testing.TB, opts ...Option) (*rest.Config, client.Client) {
	t.Helper()

	dir, err := AssetsDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	apiserver := filepath.Join(dir, "kube-apiserver")
	etcd := filepath.Join(dir, "etcd")
	for _, bin := range []string{apiserver, etcd} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("testenv: %s not found (%v): run `make tools` to build the control-plane binaries into bin/", bin, err)
		}
	}

	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// Set the paths explicitly so that TEST_ASSET_* variables cannot swap in
	// other binaries behind our back.
	env.ControlPlane.GetAPIServer().Path = apiserver
	env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	for _, o := range opts {
		o(env)
	}

	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("testenv: starting envtest with binaries from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("testenv: stopping envtest: %v", err)
		}
	})

	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("testenv: creating client: %v", err)
	}
	return cfg, c
}

// AssetsDir returns $KUBEBUILDER_ASSETS if set, else <repo root>/bin, where
// the repo root is the nearest directory above the working directory that
// contains a go.mod.
func AssetsDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod found above the working directory; set %s to the directory holding kube-apiserver and etcd", AssetsEnv)
		}
		dir = parent
	}
}
