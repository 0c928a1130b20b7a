package cloudscale

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

const (
	testCluster = "c-test"
	testToken   = "t"
)

// env is an emulator served over HTTP, a Cloud on it and an SDK client to
// look at the emulator behind the Cloud's back (its requests count too, so
// tests that count take differences around the code under test).
type env struct {
	t      *testing.T
	emu    *emucs.Emulator
	url    string
	cloud  *Cloud
	client *Client
	sdk    *sdk.Client
	ctx    context.Context
}

func newEnv(t *testing.T, cfg emucs.Config) *env {
	t.Helper()
	return newEnvToken(t, cfg, testToken)
}

// newEnvToken is newEnv with a default token, which the emulator must accept
// when cfg.Tokens is set.
func newEnvToken(t *testing.T, cfg emucs.Config, token string) *env {
	t.Helper()
	e, err := emucs.New(cfg)
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	v := &env{t: t, emu: e, url: srv.URL + "/", ctx: context.Background()}
	v.cloud = New(Options{BaseURL: v.url, DefaultToken: token})
	v.client = newTestClient(t, v.cloud, token)
	v.sdk = sdk.NewClient(srv.Client())
	v.sdk.BaseURL, _ = url.Parse(v.url)
	v.sdk.AuthToken = token
	return v
}

// newTestClient is the client of the token, with an open gate of its own.
func newTestClient(t *testing.T, c *Cloud, token string) *Client {
	t.Helper()
	cl, err := c.NewClient(cloud.Credentials{Values: map[string]string{TokenKey: token}, Source: "the test's token"}, cloud.NewGate(Name, cloud.RateLimit{}))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cl.(*Client)
}

func (v *env) spec(mutate func(p *v1beta1.CloudscaleMachineProviderSpec)) *Spec {
	v.t.Helper()
	return parseSpec(v.t, mutate)
}

// parseSpec builds a spec through ParseSpec, from a minimal valid one.
func parseSpec(t *testing.T, mutate func(p *v1beta1.CloudscaleMachineProviderSpec)) *Spec {
	t.Helper()
	p := &v1beta1.CloudscaleMachineProviderSpec{Zone: "rma1", Flavor: "flex-4-1", Image: "debian-12", Interfaces: []v1beta1.Interface{{Type: v1beta1.InterfaceTypePublic}}}
	if mutate != nil {
		mutate(p)
	}
	raw, err := v1beta1.RawExtension(p)
	if err != nil {
		t.Fatal(err)
	}
	s, errs := New(Options{}).ParseSpec(machinev1.ProviderSpec{Value: raw}, v1beta1.SpecPath)
	if len(errs) > 0 {
		t.Fatalf("spec: %v", errs.ToAggregate())
	}
	return s.(*Spec)
}

func ref(name string) cloud.MachineRef { return cloud.MachineRef{Name: name, ClusterID: testCluster} }

// sel selects the servers of a Machine of the test cluster ("": all of it).
func sel(machine string) cloud.Selector {
	return cloud.Selector{ClusterID: testCluster, Machine: machine}
}

func (v *env) create(name string, spec *Spec) *cloud.Server {
	v.t.Helper()
	return v.createFor(ref(name), spec)
}

// createFor creates a server for the Machine m.
func (v *env) createFor(m cloud.MachineRef, spec *Spec) *cloud.Server {
	v.t.Helper()
	s, created, err := v.client.CreateServer(v.ctx, m, spec, nil)
	if err != nil {
		v.t.Fatalf("creating %s: %v", m.Name, err)
	}
	if !created {
		v.t.Fatalf("creating %s found server %s instead", m.Name, s.ID)
	}
	return s
}

func (v *env) server(id string) *sdk.Server {
	v.t.Helper()
	s, err := v.sdk.Servers.Get(v.ctx, id)
	if err != nil {
		v.t.Fatalf("reading server %s: %v", id, err)
	}
	return s
}

func (v *env) volume(id string) *sdk.Volume {
	v.t.Helper()
	vol, err := v.sdk.Volumes.Get(v.ctx, id)
	if err != nil {
		v.t.Fatalf("reading volume %s: %v", id, err)
	}
	return vol
}

func (v *env) groups() []sdk.ServerGroup {
	v.t.Helper()
	l, err := v.sdk.ServerGroups.List(v.ctx)
	if err != nil {
		v.t.Fatalf("listing server groups: %v", err)
	}
	return l
}

func (v *env) servers() []sdk.Server {
	v.t.Helper()
	l, err := v.sdk.Servers.List(v.ctx)
	if err != nil {
		v.t.Fatalf("listing servers: %v", err)
	}
	return l
}

// calls returns what fn cost in API requests: the total and the requests by
// route.
func (v *env) calls(fn func()) (int64, map[string]int64) {
	h := v.emu.Harness()
	before := h.Requests()
	total := h.Total()
	fn()
	after := h.Requests()
	diff := map[string]int64{}
	for k, n := range after {
		if d := n - before[k]; d != 0 {
			diff[k] = d
		}
	}
	return h.Total() - total, diff
}

func asInvalid(t *testing.T, err error) *cloud.InvalidConfigError {
	t.Helper()
	var ic *cloud.InvalidConfigError
	if !errors.As(err, &ic) {
		t.Fatalf("error %v (%T), want an InvalidConfigError", err, err)
	}
	return ic
}

func asRetryable(t *testing.T, err error) *cloud.RetryableError {
	t.Helper()
	var re *cloud.RetryableError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T), want a RetryableError", err, err)
	}
	return re
}

func mustNotContain(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q contains the secret %q", err, s)
		}
	}
}

// storedServer is what the emulator's state file keeps of a server beyond
// what the API gives back: its user data and SSH keys.
func storedServer(t *testing.T, state, id string) struct {
	UserData string   `json:"user_data"`
	SSHKeys  []string `json:"ssh_keys"`
} {
	t.Helper()
	var world struct {
		Servers map[string]struct {
			UserData string   `json:"user_data"`
			SSHKeys  []string `json:"ssh_keys"`
		} `json:"servers"`
	}
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &world); err != nil {
		t.Fatal(err)
	}
	return world.Servers[id]
}

// noNodes is the Node veto of a cluster without Nodes: every delete goes.
var noNodes = nodes.Veto{Index: nodes.New("cloudscale", nil)}
