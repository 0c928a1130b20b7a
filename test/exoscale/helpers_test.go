package exoscale

import (
	"encoding/json"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// Canaries: if any shows up in a log line, an event, a status or a metric,
// a secret leaked.
const (
	canaryKey      = "EXO0c0ffee0123456789abcdef"
	canarySecret   = "cnry-exo-secret-Wd83Kq19Zp"
	canaryUserData = `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core","passwordHash":"cnry-exo-userdata-Lm47Tx"}]}}`
	canaryInUD     = "cnry-exo-userdata-Lm47Tx"
)

const createPOST = "POST /v2/instance"

// env starts the control plane and the Exoscale emulator with one account,
// whose key and secret are in the secret Machines name.
func env(t *testing.T, cfg emu.Config) *fixture.Env {
	t.Helper()
	if cfg.Accounts == nil {
		cfg.Accounts = []emu.Account{{Name: "openshift", Key: canaryKey, Secret: canarySecret}}
	}
	e := fixture.Start(t, fixture.Options{Cloud: fixture.Exoscale, ExoscaleEmulator: cfg})
	secret(t, e, "exoscale-credentials", map[string]string{"api-key": canaryKey, "api-secret": canarySecret})
	secret(t, e, "worker-user-data", map[string]string{"userData": canaryUserData})
	return e
}

// startManager starts the provider without default credentials: every
// Machine names its secret.
func startManager(t *testing.T, e *fixture.Env, o manager.Options) func() {
	t.Helper()
	if o.Cloud == nil {
		o.Cloud = e.ExoscaleCloud("", "")
	}
	return e.StartManager(t, o)
}

func secret(t *testing.T, e *fixture.Env, name string, data map[string]string) {
	t.Helper()
	e.Secret(t, name, data)
}

// spec is a valid provider spec; edit changes it before it is encoded.
func spec(edit func(s map[string]any)) string {
	s := map[string]any{
		"apiVersion": "machine.appuio.io/v1beta1", "kind": "ExoscaleMachineProviderSpec",
		"zone": "ch-gva-2", "instanceType": "standard.large", "template": map[string]string{"name": "rhcos-4.19"},
		"diskSize":          120,
		"labels":            map[string]string{"team": "platform"},
		"userDataSecret":    map[string]string{"name": "worker-user-data"},
		"credentialsSecret": map[string]string{"name": "exoscale-credentials"},
	}
	if edit != nil {
		edit(s)
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func createMachine(t *testing.T, e *fixture.Env, name, specJSON string) {
	t.Helper()
	e.CreateMachine(t, name, specJSON)
}

func getMachine(t *testing.T, e *fixture.Env, name string) *machinev1.Machine {
	t.Helper()
	return e.GetMachine(t, name)
}

func phase(m *machinev1.Machine) string { return fixture.Phase(m) }

func waitPhase(t *testing.T, e *fixture.Env, name, want string) *machinev1.Machine {
	t.Helper()
	return e.WaitPhase(t, name, want)
}

func instancesOf(e *fixture.Env, machine string) []emu.InstanceInfo {
	var out []emu.InstanceInfo
	for _, i := range e.Exoscale.Instances() {
		if i.Labels["machine-api-provider.appuio.io/machine"] == machine {
			out = append(out, i)
		}
	}
	return out
}

// writes counts the requests to the emulator that change something.
func writes(e *fixture.Env) int64 {
	var n int64
	for route, c := range e.Harness().Requests() {
		if !strings.HasPrefix(route, "GET ") {
			n += c
		}
	}
	return n
}

// assertNoCanary scans logs, events, Machines, MachineSets and metrics for
// the canaries in any form (test/canary).
func assertNoCanary(t *testing.T, e *fixture.Env) {
	t.Helper()
	e.AssertNoCanary(t, canarySecret, canaryInUD)
}
