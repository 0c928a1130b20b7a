package actuator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/manager"
)

// TestWhatTheCloudCanRefuteIsRefusedBeforeAnyWrite: a fixed address
// outside its subnet, a subnet of another network, a root volume smaller
// than the custom image and a malformed SSH key are refused from what the
// cloud's lists say (or the spec itself), before anything is written.
func TestWhatTheCloudCanRefuteIsRefusedBeforeAnyWrite(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	net := func(name string) (string, string) {
		req := &cloudscale.NetworkCreateRequest{Name: name}
		req.Zone = "rma1"
		n, err := sdk(e).Networks.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return n.UUID, n.Subnets[0].UUID
	}
	netA, subnetA := net("net-a")
	_, subnetB := net("net-b")
	withAddress := func(subnet, address string) func(s map[string]any) {
		return func(s map[string]any) {
			s["interfaces"] = []any{map[string]any{"type": "Public"}, map[string]any{"type": "Private", "networkUUID": netA,
				"addresses": []any{map[string]string{"subnetUUID": subnet, "address": address}}}}
		}
	}
	e.Harness().ResetRequests()
	e.StartManager(t, manager.Options{})
	cases := map[string]struct {
		edit func(s map[string]any)
		want string
	}{
		"worker-range":  {withAddress(subnetA, "172.16.1.5"), "spec.providerSpec.value.interfaces[1].addresses[0].address: 172.16.1.5 is not an address subnet"},
		"worker-subnet": {withAddress(subnetB, "172.16.0.5"), "spec.providerSpec.value.interfaces[1].addresses[0].subnetUUID: subnet " + subnetB + " is of network"},
		"worker-volume": {func(s map[string]any) { s["rootVolumeSizeGB"] = 12 }, "spec.providerSpec.value.rootVolumeSizeGB: custom image \"custom:rhcos-4.19\" needs a root volume of at least 16 GB"},
		"worker-key":    {func(s map[string]any) { s["sshKeys"] = []string{"ssh-ed25519 AAAA admin@example"} }, "spec.providerSpec.value.sshKeys[0]"},
	}
	for name, c := range cases {
		createMachine(t, e, name, spec(c.edit))
	}
	for name, c := range cases {
		m := waitPhase(t, e, name, machinev1.PhaseFailed)
		if m.Status.ErrorMessage == nil || !strings.Contains(*m.Status.ErrorMessage, c.want) {
			t.Errorf("%s failed with %q, want %q", name, ptrString(m.Status.ErrorMessage), c.want)
		}
	}
	for route, n := range e.Harness().Requests() {
		if !strings.HasPrefix(route, "GET ") {
			t.Errorf("%d writes %s", n, route)
		}
	}
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
