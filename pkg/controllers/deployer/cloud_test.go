package deployer

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestDeploymentForExoscale: another cloud is configuration only: the
// manager's --cloud, the secret it reads its default credentials from
// (with the cloud's own keys), and further environment.
func TestDeploymentForExoscale(t *testing.T) {
	s := testSpec()
	s.TokenSecret = "exoscale-credentials"
	s.Cloud = "exoscale"
	s.ProviderEnv = []corev1.EnvVar{{Name: "EXOSCALE_API_ENDPOINT", Value: "https://api-de-fra-1.exoscale.com/v2"}}
	c := findContainer(t, Deployment(s).Spec.Template.Spec.Containers, MachineContainer)
	if v, ok := argValue(c.Args, "--cloud"); !ok || v != "exoscale" {
		t.Errorf("--cloud %q (%v) in %v", v, ok, c.Args)
	}
	if v, ok := argValue(c.Args, "--default-credentials-secret"); !ok || v != "exoscale-credentials" {
		t.Errorf("--default-credentials-secret %q (%v) in %v", v, ok, c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("%s comes from secret %s: the manager reads its credentials itself, at every use", e.Name, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	if env["EXOSCALE_API_ENDPOINT"].Value != "https://api-de-fra-1.exoscale.com/v2" {
		t.Errorf("endpoint %+v", env["EXOSCALE_API_ENDPOINT"])
	}
	// Without configuration, cloudscale.ch as before.
	d := findContainer(t, Deployment(testSpec()).Spec.Template.Spec.Containers, MachineContainer)
	if _, ok := argValue(d.Args, "--cloud"); ok {
		t.Errorf("default: args %v", d.Args)
	}
	if v, _ := argValue(d.Args, "--default-credentials-secret"); v != "cloudscale-token" {
		t.Errorf("default: args %v", d.Args)
	}
}

// TestDeploymentNamedAfterTheCloud: the Deployment, its selector and its
// pods' instance label carry the cloud's name. Without a cloud they are exactly what they always were, so
// that an existing installation is upgraded in place (a Deployment's
// selector cannot change).
func TestDeploymentNamedAfterTheCloud(t *testing.T) {
	for cloud, want := range map[string]string{
		"":           "machine-api-controllers-cloudscale",
		"cloudscale": "machine-api-controllers-cloudscale",
		"exoscale":   "machine-api-controllers-exoscale",
	} {
		if got := DeploymentName(cloud); got != want {
			t.Errorf("DeploymentName(%q) = %s, want %s", cloud, got, want)
		}
		s := testSpec()
		s.Cloud = cloud
		d := Deployment(s)
		if d.Name != want {
			t.Errorf("cloud %q: Deployment %s, want %s", cloud, d.Name, want)
		}
		wantSelector := map[string]string{"api": "clusterapi", "k8s-app": "controller", "app.kubernetes.io/instance": want}
		if !maps.Equal(d.Spec.Selector.MatchLabels, wantSelector) {
			t.Errorf("cloud %q: selector %v, want %v", cloud, d.Spec.Selector.MatchLabels, wantSelector)
		}
		if l := d.Spec.Template.Labels["app.kubernetes.io/instance"]; l != want {
			t.Errorf("cloud %q: the pods' instance label is %q, want %s", cloud, l, want)
		}
	}
}

// TestCloudMakesAValidName: New refuses a cloud that would make an invalid
// Deployment name or label value, before anything is applied.
func TestCloudMakesAValidName(t *testing.T) {
	for cloud, ok := range map[string]bool{
		"":                      true,
		"exoscale":              true,
		"Exoscale":              false,
		"exo_scale":             false,
		"exoscale.ch":           false,
		strings.Repeat("a", 39): true, // 24 + 39 = 63, a label value's limit
		strings.Repeat("a", 40): false,
		"what?":                 false,
	} {
		_, err := New(nil, nil, nil, Options{ProviderImage: "provider:test", Cloud: cloud})
		if (err == nil) != ok {
			t.Errorf("cloud %q: error %v, want accepted: %v", cloud, err, ok)
		}
	}
}
