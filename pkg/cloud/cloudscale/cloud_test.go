package cloudscale

import (
	"net/http/httptest"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func TestName(t *testing.T) {
	t.Parallel()
	c := New(Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "default"})
	if c.Name() != "cloudscale" || c.SpecKind() != v1beta1.SpecKind {
		t.Errorf("Name() = %q, SpecKind() = %q", c.Name(), c.SpecKind())
	}
	if keys := c.CredentialKeys(); len(keys) != 1 || keys[0] != "token" {
		t.Errorf("CredentialKeys() = %v, want [token]", keys)
	}
}

func TestDefaultCredentials(t *testing.T) {
	t.Setenv(EnvAPIToken, "")
	if d := New(Options{BaseURL: "http://127.0.0.1:1/"}).DefaultCredentials(); d != nil {
		t.Errorf("default credentials %v without a token", d.Source)
	}
	d := New(Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "tok-12345"}).DefaultCredentials()
	if d == nil || d.Values[TokenKey] != "tok-12345" {
		t.Fatalf("default credentials %+v, want the default token", d)
	}
	// A malformed default token is refused at start, not used.
	c := New(Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "tok-12345\n"})
	if c.DefaultCredentials() != nil {
		t.Error("a default token with a trailing newline was taken")
	}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "newline") || strings.Contains(err.Error(), "tok-12345") {
		t.Errorf("Check() = %v, want an error about the newline that does not quote the token", err)
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
	c := New(Options{})
	cl, err := c.NewClient(*c.DefaultCredentials(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListServers(t.Context(), cloud.Selector{ClusterID: testCluster}); err != nil {
		t.Fatalf("listing with URL and token from the environment: %v", err)
	}
	if n := e.Harness().Count("GET /v1/servers"); n != 1 {
		t.Errorf("GET /v1/servers = %d, want 1", n)
	}
}

func TestBadBaseURL(t *testing.T) {
	t.Parallel()
	c := New(Options{BaseURL: "not a url", DefaultToken: "x"})
	if _, err := c.NewClient(cloud.Credentials{Values: map[string]string{TokenKey: "x"}}, nil); err == nil {
		t.Fatal("a base URL without scheme and host was accepted")
	}
	if c.Check() == nil {
		t.Fatal("Check() accepted a base URL without scheme and host")
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
		p.AntiAffinityKey = "workers"
		p.BaseDomain = "example.net"
	})
	for name, got := range map[string]any{
		"Zone": s.Zone(), "Region": s.Region(), "InstanceType": s.InstanceType(),
		"RootVolumeGiB": s.RootVolumeGiB(), "CredentialsSecretName": s.CredentialsSecretName(), "UserDataSecretName": s.UserDataSecretName(),
		"AntiAffinityKey": s.AntiAffinityKey(), "ServerName": s.ServerName("w-1"), "CredentialsSecretField": s.CredentialsSecretField(),
	} {
		want := map[string]any{"Zone": "lpg1", "Region": "lpg", "InstanceType": "plus-16-4", "RootVolumeGiB": v1beta1.DefaultRootVolumeSizeGB, "CredentialsSecretName": "tok",
			"UserDataSecretName": "ud", "AntiAffinityKey": "workers", "ServerName": "w-1", "CredentialsSecretField": "tokenSecret"}[name]
		if got != want {
			t.Errorf("%s() = %v, want %v", name, got, want)
		}
	}
	if r := v.spec(nil).Region(); r != "rma" {
		t.Errorf("region of rma1 = %q, want rma", r)
	}
	if n := v.spec(nil).CredentialsSecretName(); n != "" {
		t.Errorf("CredentialsSecretName without tokenSecret = %q", n)
	}

	spec, errs := v.cloud.ParseSpec(machinev1.ProviderSpec{}, v1beta1.SpecPath)
	if len(errs) == 0 || spec != nil {
		t.Fatalf("ParseSpec of an empty spec = %v, %v; want a nil Spec and errors", spec, errs)
	}
}

func TestCredentialsSecretOfAnInvalidSpec(t *testing.T) {
	t.Parallel()
	c := New(Options{BaseURL: "http://127.0.0.1:1/"})
	for raw, want := range map[string]struct {
		name string
		ok   bool
	}{
		`{"zone": 7, "tokenSecret": {"name": "tok"}}`: {"tok", true},
		`{"zone": "rma1"}`:                            {"", true},
		`not json`:                                    {"", false},
	} {
		name, ok := c.CredentialsSecretOf(machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(raw)}})
		if name != want.name || ok != want.ok {
			t.Errorf("CredentialsSecretOf(%s) = %q, %v; want %q, %v", raw, name, ok, want.name, want.ok)
		}
	}
}
