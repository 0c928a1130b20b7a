package demo

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// openShiftCRDs are the CRDs an OpenShift cluster has that the Machine API
// and the cluster-autoscaler-operator need, as the openshift/api module in
// go.mod defines them: Machine, MachineSet, MachineHealthCheck; the
// Infrastructure; and the ClusterVersion, FeatureGate, APIServer and
// ClusterOperator the operator reads and writes (openshift.go makes the
// objects). dir is the module's directory; "" finds it with go list, which
// needs the repository and Go (the demo's container image holds a copy
// instead: --openshift-api).
func openShiftCRDs(dir string) ([]string, error) {
	if dir == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
		if err != nil {
			return nil, fmt.Errorf("locating the openshift/api module (run from the repository): %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	machine := filepath.Join(dir, "machine", "v1beta1", "zz_generated.crd-manifests")
	config := filepath.Join(dir, "config", "v1", "zz_generated.crd-manifests")
	return []string{
		filepath.Join(machine, "0000_10_machine-api_01_machines-Default.crd.yaml"),
		filepath.Join(machine, "0000_10_machine-api_01_machinesets-Default.crd.yaml"),
		filepath.Join(machine, "0000_10_machine-api_01_machinehealthchecks.crd.yaml"),
		filepath.Join(config, "0000_10_config-operator_01_infrastructures-Default.crd.yaml"),
		filepath.Join(config, "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml"),
		filepath.Join(config, "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml"),
		filepath.Join(config, "0000_10_config-operator_01_featuregates.crd.yaml"),
		filepath.Join(config, "0000_10_config-operator_01_apiservers-Default.crd.yaml"),
		// MachineConfiguration, for the boot-image skew record: the
		// TechPreviewNoUpgrade set's, which has bootImageSkewEnforcement
		// (Default from 4.22; this module version's Default predates it)
		filepath.Join(dir, "operator", "v1", "zz_generated.crd-manifests", "0000_80_machine-config_01_machineconfigurations-TechPreviewNoUpgrade.crd.yaml"),
	}, nil
}
