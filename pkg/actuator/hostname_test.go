package actuator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestServerBootsAsItsMachine: a server made from the installer's pointer
// Ignition, which sets no hostname, boots as its Machine — the boot
// simulation names its Node from the /etc/hostname the user data writes,
// and on cloudscale.ch, whose RHCOS gets no name from the cloud, would
// otherwise name it localhost. User data that sets another hostname is
// left as it is (its Node is named so) and reported on the Machine;
// user data that is no Ignition (cloud-config from a template) is left
// alone.
func TestServerBootsAsItsMachine(t *testing.T) {
	e := env(t)
	const pointer = `{"ignition":{"config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,Q0EK"}]}},"version":"3.2.0"}}`
	secret(t, e, "pointer", map[string]string{"userData": pointer, "disableTemplating": "true"})
	secret(t, e, "other-hostname", map[string]string{"userData": `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","mode":420,"contents":{"source":"data:,elsewhere"}}]}}`})
	// A template (not JSON) yielding cloud-config.
	secret(t, e, "cloud-config", map[string]string{"userData": `local head = '#cloud-config\n'; head + 'packages: [htop]\n'`})
	e.StartManager(t, manager.Options{})
	for machine, secretName := range map[string]string{"pointer-a": "pointer", "named-a": "other-hostname", "config-a": "cloud-config"} {
		createMachine(t, e, machine, spec(func(s map[string]any) { s["userDataSecret"] = map[string]string{"name": secretName} }))
	}
	servers := map[string]string{}
	for _, m := range []string{"pointer-a", "named-a", "config-a"} {
		waitPhase(t, e, m, machinev1.PhaseProvisioned)
		s := serversOf(t, e, m)
		if len(s) != 1 {
			t.Fatalf("%s: %d servers", m, len(s))
		}
		servers[m] = "cloudscale://" + s[0].UUID
	}
	if ud := userDataOf(t, e, strings.TrimPrefix(servers["config-a"], "cloudscale://")); ud != "#cloud-config\npackages: [htop]\n" {
		t.Errorf("cloud-config user data changed: %q", ud)
	}

	sim := bootsim.New(e.Client, demo.CloudscaleServers(e.Emulator), bootsim.Options{})
	want := map[string]string{"pointer-a": "pointer-a", "named-a": "elsewhere", "config-a": bootsim.DefaultHostname}
	fixture.Eventually(t, time.Minute, "every server's Node", func() (bool, error) {
		if err := sim.Step(context.Background()); err != nil {
			return false, err
		}
		var nodes corev1.NodeList
		if err := e.Client.List(context.Background(), &nodes); err != nil {
			return false, err
		}
		byServer := map[string]string{}
		for _, n := range nodes.Items {
			byServer[n.Spec.ProviderID] = n.Name
		}
		for m, name := range want {
			if byServer[servers[m]] != name {
				return false, fmt.Errorf("the Node of Machine %s is %q, want %q", m, byServer[servers[m]], name)
			}
		}
		return true, nil
	})

	fixture.Eventually(t, 30*time.Second, "named-a's HostnameNotMachineName event", func() (bool, error) {
		text := fixture.EventText(e.Events(t, "named-a"))
		return strings.Contains(text, "HostnameNotMachineName") && strings.Contains(text, `"elsewhere"`), nil
	})
	for _, m := range []string{"pointer-a", "config-a"} {
		if text := fixture.EventText(e.Events(t, m)); strings.Contains(text, "Hostname") {
			t.Errorf("%s: hostname event %s", m, text)
		}
	}
	var n corev1.Node
	if err := e.Client.Get(context.Background(), client.ObjectKey{Name: "pointer-a"}, &n); err != nil {
		t.Errorf("no Node named as Machine pointer-a: %v", err)
	}
	assertNoCanary(t, e)
}
