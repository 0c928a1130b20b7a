package cloudscale

import (
	"net/http/httptest"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestNameAndClientPerToken(t *testing.T) {
	t.Parallel()
	c := New(Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "default"})
	if c.Name() != "cloudscale" {
		t.Errorf("Name() = %q", c.Name())
	}
	a, err := c.Client("")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Client("")
	x, _ := c.Client("other")
	y, _ := c.Client("other")
	if a != b || x != y {
		t.Error("the same token got two clients; clients must be cached per token")
	}
	if a == x {
		t.Error("two tokens share a client")
	}
}

func TestClientWithoutToken(t *testing.T) {
	t.Setenv(EnvAPIToken, "")
	_, err := New(Options{BaseURL: "http://127.0.0.1:1/"}).Client("")
	if err == nil || !strings.Contains(err.Error(), EnvAPIToken) || !strings.Contains(err.Error(), "tokenSecret") {
		t.Fatalf("error %v, want one naming %s and tokenSecret", err, EnvAPIToken)
	}
}

func TestOptionsFromEnvironment(t *testing.T) {
	e, err := emucs.New(emucs.Config{Tokens: map[string]emucs.Access{"env-token-1": emucs.ReadWrite}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	// No trailing slash: New adds it, or the SDK would resolve v1/servers
	// against the host's parent path.
	t.Setenv(EnvAPIURL, srv.URL)
	t.Setenv(EnvAPIToken, "env-token-1")
	cl, err := New(Options{}).Client("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListServers(t.Context(), testCluster); err != nil {
		t.Fatalf("listing with URL and token from the environment: %v", err)
	}
	if n := e.Harness().Count("GET /v1/servers"); n != 1 {
		t.Errorf("GET /v1/servers = %d, want 1", n)
	}
}

func TestBadBaseURL(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{BaseURL: "not a url", DefaultToken: "x"}).Client(""); err == nil {
		t.Fatal("a base URL without scheme and host was accepted")
	}
}

func TestParseSpec(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	s := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.Zone = "lpg1"
		p.Flavor = "plus-16-4"
		p.TokenSecret = &corev1.LocalObjectReference{Name: "tok"}
		p.UserDataSecret = &corev1.LocalObjectReference{Name: "ud"}
	})
	for name, got := range map[string]any{
		"Zone": s.Zone(), "Region": s.Region(), "InstanceType": s.InstanceType(),
		"RootVolumeGiB": s.RootVolumeGiB(), "TokenSecretName": s.TokenSecretName(), "UserDataSecretName": s.UserDataSecretName(),
	} {
		want := map[string]any{"Zone": "lpg1", "Region": "lpg", "InstanceType": "plus-16-4", "RootVolumeGiB": 50, "TokenSecretName": "tok", "UserDataSecretName": "ud"}[name]
		if got != want {
			t.Errorf("%s() = %v, want %v", name, got, want)
		}
	}
	if r := v.spec(nil).Region(); r != "rma" {
		t.Errorf("region of rma1 = %q, want rma", r)
	}
	if n := v.spec(nil).TokenSecretName(); n != "" {
		t.Errorf("TokenSecretName without tokenSecret = %q", n)
	}

	spec, errs := v.cloud.ParseSpec(machinev1.ProviderSpec{}, v1beta1.SpecPath)
	if len(errs) == 0 || spec != nil {
		t.Fatalf("ParseSpec of an empty spec = %v, %v; want a nil Spec and errors", spec, errs)
	}
}
