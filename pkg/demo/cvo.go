package demo

// The cluster-version operator's part for the cluster-autoscaler-operator:
// on OpenShift the CVO applies the manifests of the operator's install/
// directory from the release payload, and substitutes the images that
// image-references names. Here they come from the pinned module, copied
// beside the operator's binary by the Makefile
// (bin/cluster-autoscaler-operator-manifests), and an image is played by
// the binary in bin/ named after its tag.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// operatorManifestsDir is where the Makefile puts the operator's install
// manifests, under the bin directory.
const operatorManifestsDir = "cluster-autoscaler-operator-manifests"

// The annotations the CVO filters a payload's manifests by.
const (
	// profileAnnotation: the manifest is for self-managed clusters (the
	// cluster profile of every cluster this provider serves).
	profileAnnotation = "include.release.openshift.io/self-managed-high-availability"
	// featureSetAnnotation lists the feature sets a manifest is for; a
	// manifest without it is for all. The local cluster runs Default.
	featureSetAnnotation = "release.openshift.io/feature-set"
)

// operatorManifests are the operator's install manifests the CVO would
// apply to a self-managed cluster of the Default feature set: the CRDs
// (files, to install with the control plane; the two monitoring CRDs
// included, which on OpenShift the monitoring stack brings) and the other
// objects, in the payload's order.
type operatorManifests struct {
	CRDs    []string
	Objects []*unstructured.Unstructured
	// Images maps the image each tag of image-references names to the
	// binary in the bin directory named after the tag, for the tags that
	// have one (cluster-autoscaler-operator, cluster-autoscaler; not
	// kube-rbac-proxy).
	Images map[string]string
}

func readOperatorManifests(binDir string) (*operatorManifests, error) {
	dir := filepath.Join(binDir, operatorManifestsDir)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s has no manifests: run `make tools`", dir)
	}
	sort.Strings(files) // the payload's order: by file name
	m := &operatorManifests{Images: map[string]string{}}
	monitoring, err := filepath.Glob(filepath.Join(dir, "monitoring", "*.yaml"))
	if err != nil {
		return nil, err
	}
	m.CRDs = append(m.CRDs, monitoring...)
	for _, f := range files {
		objs, err := readYAMLObjects(f)
		if err != nil {
			return nil, err
		}
		crd := false
		for _, o := range objs {
			if !appliedByCVO(o) {
				continue
			}
			if o.GetKind() == "CustomResourceDefinition" {
				crd = true
				continue
			}
			m.Objects = append(m.Objects, o)
		}
		if crd {
			m.CRDs = append(m.CRDs, f)
		}
	}
	refs, err := readYAMLObjects(filepath.Join(dir, "image-references"))
	if err != nil {
		return nil, err
	}
	for _, is := range refs {
		tags, _, _ := unstructured.NestedSlice(is.Object, "spec", "tags")
		for _, t := range tags {
			tag, _ := t.(map[string]any)
			name, _, _ := unstructured.NestedString(tag, "name")
			image, _, _ := unstructured.NestedString(tag, "from", "name")
			if name == "" || image == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(binDir, name)); err == nil {
				m.Images[image] = filepath.Join(binDir, name)
			}
		}
	}
	for _, want := range []string{"cluster-autoscaler-operator", "cluster-autoscaler"} {
		if !slices.ContainsFunc(mapValues(m.Images), func(b string) bool { return filepath.Base(b) == want }) {
			return nil, fmt.Errorf("no image of %s/image-references is played by %s: run `make tools`", dir, filepath.Join(binDir, want))
		}
	}
	return m, nil
}

// appliedByCVO says whether the CVO applies o on a self-managed cluster of
// the Default feature set: the DevPreview ProvisioningRequest CRD and its
// RBAC, for one, are left out.
func appliedByCVO(o *unstructured.Unstructured) bool {
	a := o.GetAnnotations()
	if a[profileAnnotation] != "true" {
		return false
	}
	if sets, ok := a[featureSetAnnotation]; ok && !slices.Contains(strings.Split(sets, ","), "Default") {
		return false
	}
	return true
}

// apply creates the objects, in order; one that exists is left as it is
// (the cluster is new: nothing else made it).
func (m *operatorManifests) apply(ctx context.Context, c client.Client) error {
	for _, o := range m.Objects {
		o = o.DeepCopy()
		// The CVO creates a ClusterOperator without the status of its
		// manifest (the operator reports its own), and with the empty
		// spec the API requires.
		if o.GetKind() == "ClusterOperator" {
			delete(o.Object, "status")
			o.Object["spec"] = map[string]any{}
		}
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the cluster-autoscaler-operator's %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

func readYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		out = append(out, o)
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
