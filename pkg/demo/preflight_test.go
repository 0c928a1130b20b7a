package demo

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestHostPortsAreThePodsPorts: the ports the demo checks before it starts
// (run by another user than root, its pods share this machine's network)
// are every port the cluster-autoscaler-operator's pod listens on, as its
// install manifests say: its containers' ports and *_PORT settings, of
// the containers the pod runner runs (kube-rbac-proxy it skips).
func TestHostPortsAreThePodsPorts(t *testing.T) {
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := readOperatorManifests(bin)
	if err != nil {
		t.Fatal(err)
	}
	images := m.runnerImages()
	checked := 0
	for _, o := range m.Objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if _, runs := images[c.Image]; !runs {
				continue
			}
			var ports []int
			for _, p := range c.Ports {
				ports = append(ports, int(p.ContainerPort))
			}
			for _, e := range c.Env {
				if strings.HasSuffix(e.Name, "_PORT") {
					p, err := strconv.Atoi(e.Value)
					if err != nil {
						t.Fatalf("%s of %s: %q", e.Name, c.Name, e.Value)
					}
					ports = append(ports, p)
				}
			}
			for _, p := range ports {
				checked++
				if !slices.Contains(HostPorts, p) {
					t.Errorf("container %s of Deployment %s listens on %d, which HostPorts %v lacks", c.Name, d.Name, p, HostPorts)
				}
			}
		}
	}
	if checked < 2 {
		t.Errorf("checked %d ports of the operator's manifests: found none of its Deployment's", checked)
	}
}
