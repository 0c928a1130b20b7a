package actuator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/actuator"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// Canaries: if either shows up in a log line, an event or a status, a
// secret leaked.
const (
	canaryToken    = "canary-token-9f3b1c7e5d"
	canaryUserData = `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core","passwordHash":"canary-userdata-4e8a2f"}]}}`
)

const createPOST = "POST /v1/servers"

// env starts the control plane, an emulator that knows only the canary
// token (which the secrets hold) and one that refuses the default token.
func env(t *testing.T) *fixture.Env {
	t.Helper()
	return envWith(t, emucs.Config{})
}

// envWith is env with an emulator configured by cfg (its tokens and state
// file are env's).
func envWith(t *testing.T, cfg emucs.Config) *fixture.Env {
	t.Helper()
	cfg.Tokens = map[string]emucs.Access{canaryToken: emucs.ReadWrite}
	cfg.StateFile = filepath.Join(t.TempDir(), "cloudscale.json")
	e := fixture.Start(t, fixture.Options{Emulator: cfg})
	secret(t, e, "cloudscale-token", map[string]string{"token": canaryToken})
	secret(t, e, "worker-user-data", map[string]string{"userData": canaryUserData})
	return e
}

func secret(t *testing.T, e *fixture.Env, name string, data map[string]string) {
	t.Helper()
	e.Secret(t, name, data)
}

// spec is a valid provider spec; edit changes it before it is encoded.
func spec(edit func(s map[string]any)) string {
	s := map[string]any{
		"apiVersion": "machine.appuio.io/v1beta1", "kind": "CloudscaleMachineProviderSpec",
		"zone": "rma1", "flavor": "flex-8-4", "image": "custom:rhcos-4.19", "rootVolumeSizeGB": 50,
		"interfaces":     []any{map[string]any{"type": "Public"}},
		"tags":           map[string]string{"team": "platform"},
		"userDataSecret": map[string]string{"name": "worker-user-data"},
		"tokenSecret":    map[string]string{"name": "cloudscale-token"},
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

// sdk is the official SDK on the emulator, to look at the cloud directly.
func sdk(e *fixture.Env) *cloudscale.Client {
	c := cloudscale.NewClient(nil)
	c.BaseURL, _ = c.BaseURL.Parse(e.APIURL)
	c.AuthToken = canaryToken
	return c
}

func serversOf(t *testing.T, e *fixture.Env, machine string) []cloudscale.Server {
	t.Helper()
	servers, err := sdk(e).Servers.List(context.Background(), cloudscale.WithTagFilter(cloudscale.TagMap{v1beta1.TagMachineName: machine}))
	if err != nil {
		t.Fatal(err)
	}
	return servers
}

func TestMachineBecomesServer(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)

	servers := serversOf(t, e, "worker-a")
	if len(servers) != 1 {
		t.Fatalf("want exactly one server, got %d", len(servers))
	}
	s := servers[0]
	if s.Flavor.Slug != "flex-8-4" || s.Image.Slug != "custom:rhcos-4.19" || s.Zone.Slug != "rma1" || s.Name != "worker-a" {
		t.Errorf("server is %s/%s/%s named %s, want flex-8-4/custom:rhcos-4.19/rma1 named worker-a", s.Flavor.Slug, s.Image.Slug, s.Zone.Slug, s.Name)
	}
	wantTags := map[string]string{"team": "platform", v1beta1.TagMachineName: "worker-a", v1beta1.TagClusterID: fixture.ClusterID}
	for k, v := range wantTags {
		if s.Tags[k] != v {
			t.Errorf("server tag %s = %q, want %q (tags %v)", k, s.Tags[k], v, s.Tags)
		}
	}
	if len(s.Volumes) == 0 || s.Volumes[0].SizeGB != 50 {
		t.Errorf("root volume %v, want 50 GB first", s.Volumes)
	}
	// The secret's Ignition, with the Machine's name as its hostname
	// (hostname_test.go).
	if got, want := userDataOf(t, e, s.UUID), strings.TrimSuffix(canaryUserData, "}")+`,"storage":{"files":[{"contents":{"source":"data:,worker-a"},"mode":420,"overwrite":true,"path":"/etc/hostname"}]}}`; got != want {
		t.Errorf("user data of the server is %q, want the secret's Ignition with its Machine's hostname %q", got, want)
	}

	if m.Spec.ProviderID == nil || *m.Spec.ProviderID != "cloudscale://"+s.UUID {
		t.Errorf("providerID %v, want cloudscale://%s", m.Spec.ProviderID, s.UUID)
	}
	addr := map[corev1.NodeAddressType]string{}
	for _, a := range m.Status.Addresses {
		if _, seen := addr[a.Type]; !seen {
			addr[a.Type] = a.Address
		}
	}
	if addr[corev1.NodeInternalDNS] != "worker-a" || addr[corev1.NodeHostName] != "worker-a" {
		t.Errorf("InternalDNS/Hostname %q/%q, want the future node name worker-a", addr[corev1.NodeInternalDNS], addr[corev1.NodeHostName])
	}
	if addr[corev1.NodeExternalIP] == "" || addr[corev1.NodeInternalIP] == "" {
		t.Errorf("addresses %v lack an ExternalIP or InternalIP", m.Status.Addresses)
	}
	for k, v := range map[string]string{"machine.openshift.io/instance-type": "flex-8-4", "machine.openshift.io/region": "rma", "machine.openshift.io/zone": "rma1"} {
		if m.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, m.Labels[k], v)
		}
	}
	if m.Annotations["machine.openshift.io/instance-state"] != "running" {
		t.Errorf("instance-state %q, want running", m.Annotations["machine.openshift.io/instance-state"])
	}
	var st v1beta1.CloudscaleMachineProviderStatus
	if err := json.Unmarshal(m.Status.ProviderStatus.Raw, &st); err != nil || st.InstanceID != s.UUID || st.Status != "running" {
		t.Errorf("providerStatus %s, want instanceId %s status running (%v)", m.Status.ProviderStatus.Raw, s.UUID, err)
	}
	e.AwaitEvent(t, "worker-a", "Normal Created")
	if n := e.Emulator.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d server create calls, want 1", n)
	}
	assertNoCanary(t, e)
}

func userDataOf(t *testing.T, e *fixture.Env, uuid string) string {
	t.Helper()
	var state struct {
		Servers map[string]struct {
			UserData string `json:"user_data"`
		} `json:"servers"`
	}
	b, err := os.ReadFile(e.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &state); err != nil {
		t.Fatal(err)
	}
	return state.Servers[uuid].UserData
}

// assertNoCanary scans logs, events, Machines, MachineSets and metrics for
// the canaries in any form (test/canary).
func assertNoCanary(t *testing.T, e *fixture.Env) {
	t.Helper()
	e.AssertNoCanary(t, canaryToken, "canary-userdata-4e8a2f")
}

func TestDeleteRemovesServer(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	createMachine(t, e, "worker-b", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	b := waitPhase(t, e, "worker-b", machinev1.PhaseProvisioned)

	// worker-b's server disappears behind the provider's back.
	var st v1beta1.CloudscaleMachineProviderStatus
	_ = json.Unmarshal(b.Status.ProviderStatus.Raw, &st)
	if err := sdk(e).Servers.Delete(context.Background(), st.InstanceID); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"worker-a", "worker-b"} {
		if err := e.Client.Delete(context.Background(), getMachine(t, e, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"worker-a", "worker-b"} {
		fixture.Eventually(t, 60*time.Second, "Machine "+name+" gone", func() (bool, error) {
			err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: fixture.Namespace, Name: name}, &machinev1.Machine{})
			return apierrors.IsNotFound(err), err
		})
		if n := len(serversOf(t, e, name)); n != 0 {
			t.Errorf("%d servers of %s left", n, name)
		}
	}
	e.AwaitEvent(t, "worker-a", "Normal Deleted")
}

func TestLostCreateResponseMakesOneServer(t *testing.T) {
	e := env(t)
	if err := e.Emulator.Harness().AddRule(harness.Rule{Route: createPOST, LostResponseRate: 1, Times: 1}); err != nil {
		t.Fatal(err)
	}
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers after a lost create response, want 1", n)
	}
	if n := e.Emulator.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d create calls, want 1: the server must be found again, not made again", n)
	}
	e.AwaitEvent(t, "worker-a", "Adopted")
}

func TestManagerRestartMidCreateMakesOneServer(t *testing.T) {
	e := env(t)
	// The cloud makes the server, and the manager dies before it hears so.
	if err := e.Emulator.Harness().AddRule(harness.Rule{Route: createPOST, LostResponseRate: 1, Times: 1}); err != nil {
		t.Fatal(err)
	}
	stop := e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	fixture.Eventually(t, 60*time.Second, "the create call", func() (bool, error) {
		return e.Emulator.Harness().Count(createPOST) >= 1, nil
	})
	stop()
	if m := getMachine(t, e, "worker-a"); m.Spec.ProviderID != nil {
		t.Fatalf("the first manager recorded the server; the test wants it to die first")
	}
	e.StartManager(t, manager.Options{})
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers after a restart mid-create, want 1", n)
	}
	if n := e.Emulator.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d create calls, want 1", n)
	}
}

func TestAntiAffinitySpreadsOverGroupsOfFour(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	for i := 0; i < 9; i++ {
		createMachine(t, e, fmt.Sprintf("worker-%d", i), spec(func(s map[string]any) { s["antiAffinityKey"] = "workers" }))
	}
	for i := 0; i < 9; i++ {
		waitPhase(t, e, fmt.Sprintf("worker-%d", i), machinev1.PhaseProvisioned)
	}
	groups, err := sdk(e).ServerGroups.List(context.Background(), cloudscale.WithTagFilter(cloudscale.TagMap{v1beta1.TagAntiAffinityKey: "workers"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 3 {
		t.Errorf("%d server groups, want 3", len(groups))
	}
	total := 0
	for _, g := range groups {
		if len(g.Servers) > 4 {
			t.Errorf("group %s has %d servers, more than 4", g.Name, len(g.Servers))
		}
		total += len(g.Servers)
	}
	if total != 9 {
		t.Errorf("%d servers in groups, want 9", total)
	}
}

func TestImmutableChangeAsksForReplacement(t *testing.T) {
	e := env(t)
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)

	m.Spec.ProviderSpec.Value.Raw = []byte(spec(func(s map[string]any) {
		s["flavor"] = "plus-16-4"
		s["tags"] = map[string]string{"team": "storage"}
	}))
	if err := e.Client.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "SpecInSync False naming the flavor", func() (bool, error) {
		var st v1beta1.CloudscaleMachineProviderStatus
		_ = json.Unmarshal(getMachine(t, e, "worker-a").Status.ProviderStatus.Raw, &st)
		for _, c := range st.Conditions {
			if c.Type == "SpecInSync" && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "spec.providerSpec.value.flavor") {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", st.Conditions)
	})
	e.AwaitEvent(t, "worker-a", "ReplacementRequired")
	// Tags are mutable: they follow the spec; the flavor stays.
	fixture.Eventually(t, 30*time.Second, "server tags in sync", func() (bool, error) {
		s := serversOf(t, e, "worker-a")
		return len(s) == 1 && s[0].Tags["team"] == "storage" && s[0].Flavor.Slug == "flex-8-4", nil
	})
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers; a spec change must never make a second one", n)
	}
}

// A create the cloud rate-limited (429) certainly made nothing: it is tried
// again after Retry-After. One that failed with a 503 may have made the
// server: the next is sent only when the grace period has passed without
// the server appearing.
func TestTransientErrorsAreRetried(t *testing.T) {
	e := env(t)
	h := e.Emulator.Harness()
	for _, r := range []harness.Rule{
		{Route: createPOST, ErrorRate: 1, ErrorStatus: 429, RetryAfterSeconds: 1, Times: 1},
		{Route: createPOST, ErrorRate: 1, ErrorStatus: 503, Times: 1},
	} {
		if err := h.AddRule(r); err != nil {
			t.Fatal(err)
		}
	}
	e.StartManager(t, manager.Options{Cloud: cloudTimingOut(e, 7*time.Second), Actuator: actuator.Options{CreateGrace: 8 * time.Second}})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if n := h.Count(createPOST); n != 3 {
		t.Errorf("%d create calls, want 3 (429, 503, success)", n)
	}
	if n := len(serversOf(t, e, "worker-a")); n != 1 {
		t.Errorf("%d servers, want 1", n)
	}
	// A CreatePending event after the 503.
	e.AwaitEvent(t, "worker-a", "CreatePending")
	events := fixture.EventText(e.Events(t, "worker-a"))
	if !regexp.MustCompile(`retrying in 1(\.\d+)?s`).MatchString(events) {
		t.Errorf("the 429's Retry-After is not honoured in the events:\n%s", events)
	}
	if !provisioningObserved(t) {
		t.Errorf("no provisioning duration was recorded")
	}
}

// provisioningObserved reports whether the provisioning metric has samples.
func provisioningObserved(t *testing.T) bool {
	t.Helper()
	return fixture.HistogramCount(t, "machine_api_provider_machine_provisioning_duration_seconds", nil) > 0
}
