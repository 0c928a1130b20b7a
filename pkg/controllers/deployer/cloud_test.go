package deployer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestDeploymentForExoscale: another cloud is configuration only: the
// manager's --cloud, the credentials secret's keys mapped to the
// environment the cloud reads, and further environment.
func TestDeploymentForExoscale(t *testing.T) {
	s := testSpec()
	s.TokenSecret = "exoscale-credentials"
	s.Cloud = "exoscale"
	s.CredentialsEnv = []CredentialEnv{{Name: "EXOSCALE_API_KEY", Key: "api-key"}, {Name: "EXOSCALE_API_SECRET", Key: "api-secret"}}
	s.ProviderEnv = []corev1.EnvVar{{Name: "EXOSCALE_API_ENDPOINT", Value: "https://api-de-fra-1.exoscale.com/v2"}}
	c := findContainer(t, Deployment(s).Spec.Template.Spec.Containers, MachineContainer)
	if v, ok := argValue(c.Args, "--cloud"); !ok || v != "exoscale" {
		t.Errorf("--cloud %q (%v) in %v", v, ok, c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for name, key := range map[string]string{"EXOSCALE_API_KEY": "api-key", "EXOSCALE_API_SECRET": "api-secret"} {
		ref := env[name].ValueFrom
		if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "exoscale-credentials" || ref.SecretKeyRef.Key != key || ref.SecretKeyRef.Optional == nil || !*ref.SecretKeyRef.Optional {
			t.Errorf("%s: %+v", name, env[name])
		}
	}
	if _, has := env["CLOUDSCALE_API_TOKEN"]; has {
		t.Errorf("the cloudscale.ch token is handed to the Exoscale provider")
	}
	if env["EXOSCALE_API_ENDPOINT"].Value != "https://api-de-fra-1.exoscale.com/v2" {
		t.Errorf("endpoint %+v", env["EXOSCALE_API_ENDPOINT"])
	}
	// Without configuration, cloudscale.ch as before.
	d := findContainer(t, Deployment(testSpec()).Spec.Template.Spec.Containers, MachineContainer)
	if _, ok := argValue(d.Args, "--cloud"); ok || d.Env[0].Name != "CLOUDSCALE_API_TOKEN" {
		t.Errorf("default: args %v, env %v", d.Args, d.Env)
	}
}
