package exoscale

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/canary"
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
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fixture.Namespace}, StringData: data}
	if err := e.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
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
	if err := e.Client.Create(context.Background(), fixture.Machine(name, specJSON)); err != nil {
		t.Fatal(err)
	}
}

func getMachine(t *testing.T, e *fixture.Env, name string) *machinev1.Machine {
	t.Helper()
	m := &machinev1.Machine{}
	if err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: fixture.Namespace, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func phase(m *machinev1.Machine) string {
	if m.Status.Phase == nil {
		return ""
	}
	return *m.Status.Phase
}

func waitPhase(t *testing.T, e *fixture.Env, name, want string) *machinev1.Machine {
	t.Helper()
	var m *machinev1.Machine
	fixture.Eventually(t, 60*time.Second, fmt.Sprintf("Machine %s in phase %s", name, want), func() (bool, error) {
		m = getMachine(t, e, name)
		return phase(m) == want, fmt.Errorf("phase %q, events:\n%s", phase(m), fixture.EventText(e.Events(t, name)))
	})
	return m
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

// assertNoCanary scans every log line, every event, every Machine and
// MachineSet and the metrics for the API key's secret and the user data, in
// any form (test/canary).
func assertNoCanary(t *testing.T, e *fixture.Env) {
	t.Helper()
	ctx := context.Background()
	var events corev1.EventList
	var machines machinev1.MachineList
	var sets machinev1.MachineSetList
	if err := e.Client.List(ctx, &events); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.List(ctx, &machines); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.List(ctx, &sets); err != nil {
		t.Fatal(err)
	}
	evJSON, _ := json.Marshal(events)
	mJSON, _ := json.Marshal(machines)
	sJSON, _ := json.Marshal(sets)
	var metrics strings.Builder
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		_, _ = expfmt.MetricFamilyToText(&metrics, f)
	}
	for where, text := range map[string]string{
		"logs": e.Logs.String(), "events": string(evJSON), "machines": string(mJSON), "machinesets": string(sJSON), "metrics": metrics.String(),
	} {
		for _, f := range canary.Scan(text, canarySecret, canaryInUD) {
			t.Errorf("the %s hold the secret %s", where, f)
		}
	}
}
