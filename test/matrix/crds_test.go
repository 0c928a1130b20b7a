package matrix

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/installmanifests"
)

// featureSetAnnotation marks a release manifest that belongs to some
// feature sets only (a comma-separated list); the cluster-version operator
// applies it only on a cluster of one of them, and one without it on all.
const featureSetAnnotation = "release.openshift.io/feature-set"

// clusterFeatureSet is the feature set of the clusters the matrix stands
// up: OpenShift's default.
const clusterFeatureSet = "Default"

// machineAPICRDs are the CRDs the matrix takes from an era's install/.
var machineAPICRDs = []string{
	"machines.machine.openshift.io",
	"machinesets.machine.openshift.io",
	"machinehealthchecks.machine.openshift.io",
}

// defaultFeatureSetCRDs returns the files of dir that hold the Machine,
// MachineSet and MachineHealthCheck CRDs a cluster of the Default feature
// set gets, chosen as the cluster-version operator chooses: by the
// manifests' release.openshift.io/feature-set annotation, not by their
// names. Eras differ in how many feature-set variants their install/ holds
// (none on 4.16; Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade and
// CustomNoUpgrade from 4.18; OKD besides from the 4.22 line), so any number
// is fine as long as each CRD is there exactly once for Default.
func defaultFeatureSetCRDs(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.crd.yaml"))
	if err != nil {
		return nil, err
	}
	found := map[string][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := installmanifests.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, u := range objs {
			if u.GetKind() != "CustomResourceDefinition" || !slices.Contains(machineAPICRDs, u.GetName()) {
				continue
			}
			if sets, ok := u.GetAnnotations()[featureSetAnnotation]; ok &&
				!slices.Contains(strings.Split(sets, ","), clusterFeatureSet) {
				continue
			}
			if len(objs) != 1 {
				return nil, fmt.Errorf("%s holds %d objects; the control plane installs CRDs by file", f, len(objs))
			}
			found[u.GetName()] = append(found[u.GetName()], f)
		}
	}
	var out []string
	for _, name := range machineAPICRDs {
		if len(found[name]) != 1 {
			return nil, fmt.Errorf("%s: want one CRD %s of the %s feature set, found %v", dir, name, clusterFeatureSet, found[name])
		}
		out = append(out, found[name][0])
	}
	return out, nil
}

// An era's install/ may hold any number of feature-set variants of its
// CRDs: the matrix takes the Default ones (on the 4.22 line: beside
// TechPreviewNoUpgrade, DevPreviewNoUpgrade and CustomNoUpgrade, an OKD
// variant, which stopped the harness when it took CRDs by file name).
func TestDefaultFeatureSetCRDs(t *testing.T) {
	crd := func(name, featureSet string) string {
		annotations := ""
		if featureSet != "" {
			annotations = fmt.Sprintf("  annotations:\n    %s: %s\n", featureSetAnnotation, featureSet)
		}
		return fmt.Sprintf("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: %s\n%s", name, annotations)
	}
	write := func(dir string, files map[string]string) {
		for f, data := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// the layout of the 4.22 line's install/ (file names as there)
	eraOf422 := map[string]string{
		"0000_30_machine-api-operator_07_machinehealthcheck.crd.yaml": crd("machinehealthchecks.machine.openshift.io", ""),
		"0000_30_machine-api-operator_01_images.configmap.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: machine-api-operator-images\n",
	}
	for _, kind := range []struct{ file, name string }{{"02_machine", "machines"}, {"03_machineset", "machinesets"}} {
		for _, set := range []string{"Default", "TechPreviewNoUpgrade", "DevPreviewNoUpgrade", "CustomNoUpgrade", "OKD"} {
			eraOf422["0000_30_machine-api-operator_"+kind.file+"."+set+".crd.yaml"] = crd(kind.name+".machine.openshift.io", set)
		}
	}
	dir := t.TempDir()
	write(dir, eraOf422)
	got, err := defaultFeatureSetCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "0000_30_machine-api-operator_02_machine.Default.crd.yaml"),
		filepath.Join(dir, "0000_30_machine-api-operator_03_machineset.Default.crd.yaml"),
		filepath.Join(dir, "0000_30_machine-api-operator_07_machinehealthcheck.crd.yaml"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("4.22 layout: %v, want %v", got, want)
	}

	// 4.16's: no variants at all
	dir = t.TempDir()
	write(dir, map[string]string{
		"0000_30_machine-api-operator_02_machine.crd.yaml":            crd("machines.machine.openshift.io", ""),
		"0000_30_machine-api-operator_03_machineset.crd.yaml":         crd("machinesets.machine.openshift.io", ""),
		"0000_30_machine-api-operator_07_machinehealthcheck.crd.yaml": crd("machinehealthchecks.machine.openshift.io", ""),
	})
	if got, err := defaultFeatureSetCRDs(dir); err != nil || len(got) != 3 {
		t.Errorf("4.16 layout: %v, %v", got, err)
	}

	// a manifest for several feature sets counts for each; two for Default
	// are an error, as is none
	dir = t.TempDir()
	write(dir, map[string]string{
		"a.crd.yaml": crd("machines.machine.openshift.io", "TechPreviewNoUpgrade,Default"),
		"b.crd.yaml": crd("machines.machine.openshift.io", ""),
		"c.crd.yaml": crd("machinehealthchecks.machine.openshift.io", "OKD"),
	})
	_, err = defaultFeatureSetCRDs(dir)
	for _, says := range []string{"machines.machine.openshift.io", "a.crd.yaml", "b.crd.yaml"} {
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("two Default Machine CRDs: %v, want an error naming %s", err, says)
		}
	}
}
