package exoscale

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

const (
	testKey    = "EXO0a1b2c3d4e5f60718293a4b5"
	testSecret = "canary-secret-Zq8wX3vN5mK2pL7r"
	clusterID  = "c1-x7k2p"
)

// env is the emulator on a loopback port, the real cloud on it and a
// client of the test account.
type env struct {
	t     *testing.T
	ctx   context.Context
	emu   *emu.Emulator
	url   string
	cloud *Cloud
	c     *Client
	gate  *cloud.Gate
	// raw is the SDK's client of the account on ch-gva-2, for arranging
	// what a test needs (networks, groups) as a user would.
	raw *v3.Client
}

func newEnv(t *testing.T, cfg emu.Config) *env {
	t.Helper()
	if cfg.Accounts == nil {
		cfg.Accounts = []emu.Account{{Name: "test", Key: testKey, Secret: testSecret, DeployTargets: []emu.DeployTargetSeed{{Zone: "ch-gva-2", Name: "dedicated-1"}}}}
	}
	e, err := emu.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	x := &env{t: t, ctx: context.Background(), emu: e, url: srv.URL + "/"}
	x.cloud = New(Options{APIEndpoint: x.url + "v2", DefaultAPIKey: testKey, DefaultAPISecret: testSecret})
	if err := x.cloud.Check(); err != nil {
		t.Fatal(err)
	}
	x.gate = cloud.NewGate(Name, cloud.RateLimit{})
	cl, err := x.cloud.NewClient(*x.cloud.DefaultCredentials(), x.gate)
	if err != nil {
		t.Fatal(err)
	}
	x.c = cl.(*Client)
	x.raw, err = v3.NewClient(credentials.NewStaticCredentials(testKey, testSecret), v3.ClientOptWithEndpoint(v3.Endpoint(x.url+"v2")))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// zone is the raw client of a zone.
func (x *env) zone(z string) *v3.Client {
	if z == "ch-gva-2" {
		return x.raw
	}
	return x.raw.WithEndpoint(v3.Endpoint(x.url + z + "/v2"))
}

// spec parses a spec given as JSON through the cloud, as the actuator does.
func (x *env) spec(specJSON string) cloud.Spec {
	x.t.Helper()
	s, errs := x.cloud.ParseSpec(machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(specJSON)}}, nil)
	if len(errs) > 0 {
		x.t.Fatalf("spec %s: %v", specJSON, errs)
	}
	return s
}

// specWith is a valid spec with members added or replaced.
func specJSON(extra map[string]any) string {
	m := map[string]any{"zone": "ch-gva-2", "instanceType": "standard.medium", "template": map[string]string{"name": "rhcos-4.19"}}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (x *env) wait(op *v3.Operation, err error) *v3.Operation {
	x.t.Helper()
	if err != nil {
		x.t.Fatal(err)
	}
	op, err = x.raw.Wait(x.ctx, op, v3.OperationStateSuccess)
	if err != nil {
		x.t.Fatal(err)
	}
	return op
}

// network makes a managed private network in a zone.
func (x *env) network(zone, name string) string {
	x.t.Helper()
	op := x.wait(x.zone(zone).CreatePrivateNetwork(x.ctx, v3.CreatePrivateNetworkRequest{
		Name: name, StartIP: []byte{172, 18, 200, 10}, EndIP: []byte{172, 18, 200, 250}, Netmask: []byte{255, 255, 255, 0},
	}))
	return string(op.Reference.ID)
}

func (x *env) securityGroup(name string) string {
	x.t.Helper()
	op := x.wait(x.raw.CreateSecurityGroup(x.ctx, v3.CreateSecurityGroupRequest{Name: name}))
	return string(op.Reference.ID)
}

func ref(machine string) cloud.MachineRef {
	return cloud.MachineRef{Name: machine, ClusterID: clusterID}
}

// writes counts the requests that change something.
func (x *env) writes() int64 {
	var n int64
	for route, c := range x.emu.Harness().Requests() {
		if len(route) > 4 && route[:4] != "GET " {
			n += c
		}
	}
	return n
}

func v3CreateGroup(name string) v3.CreateAntiAffinityGroupRequest {
	return v3.CreateAntiAffinityGroupRequest{Name: name, Description: "made by the user"}
}

func v3UUID(s string) v3.UUID { return v3.UUID(s) }

// noNodes is the Node veto of a cluster without Nodes: every delete goes.
var noNodes = nodes.Veto{Index: nodes.New("exoscale", nil)}
