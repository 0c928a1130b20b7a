package actuator_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

const readOnlyToken = "canary-read-only-token-5b1e7c"

// TestReadOnlyTokenCostsWritesOnly: a read-only token is a refused
// permission, not refused credentials. The Machine whose create it cannot
// make gets a PermissionDenied event naming the scope to grant; the refusal
// is counted by operation; and the token's reads go on: a Machine whose
// server exists (made with another token) is found and provisioned with it
// at once, without a call held back as if the token were refused.
func TestReadOnlyTokenCostsWritesOnly(t *testing.T) {
	e := fixture.Start(t, fixture.Options{Emulator: emucs.Config{
		Tokens:    map[string]emucs.Access{canaryToken: emucs.ReadWrite, readOnlyToken: emucs.ReadOnly},
		StateFile: filepath.Join(t.TempDir(), "cloudscale.json"),
	}})
	secret(t, e, "read-only-token", map[string]string{"token": readOnlyToken})
	secret(t, e, "worker-user-data", map[string]string{"userData": canaryUserData})
	readOnly := func(s map[string]any) { s["tokenSecret"] = map[string]string{"name": "read-only-token"} }

	// worker-c's server, made with a read/write token, carrying what the
	// provider would give it: nothing about it needs a write.
	tags := cloudscale.TagMap{"team": "platform", v1beta1.TagMachineName: "worker-c", v1beta1.TagClusterID: fixture.ClusterID}
	ifaces := []cloudscale.InterfaceRequest{{Network: "public"}}
	req := &cloudscale.ServerRequest{Name: "worker-c", Flavor: "flex-8-4", Image: "custom:rhcos-4.19", Zone: "rma1", VolumeSizeGB: 50,
		SSHKeys: []string{}, Interfaces: &ifaces}
	req.Tags = &tags
	srv, err := sdk(e).Servers.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	rootTags := cloudscale.TagMap{v1beta1.TagMachineName: "worker-c", v1beta1.TagClusterID: fixture.ClusterID}
	vol := &cloudscale.VolumeUpdateRequest{}
	vol.Tags = &rootTags
	if err := sdk(e).Volumes.Update(context.Background(), srv.Volumes[0].UUID, vol); err != nil {
		t.Fatal(err)
	}

	heldForAuth := fixture.CounterSum(t, "machine_api_provider_cloud_requests_held_total", map[string]string{"cloud": "cloudscale", "reason": "auth"})
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-b", spec(readOnly))
	fixture.Eventually(t, 60*time.Second, "a PermissionDenied event naming the scope", func() (bool, error) {
		text := fixture.EventText(e.Events(t, "worker-b"))
		return strings.Contains(text, "PermissionDenied") && strings.Contains(text, "read/write"), nil
	})
	createMachine(t, e, "worker-c", spec(readOnly))
	waitPhase(t, e, "worker-c", machinev1.PhaseProvisioned)
	if text := fixture.EventText(e.Events(t, "worker-c")); strings.Contains(text, "Warning") {
		t.Errorf("worker-c, whose server needs no write, had trouble:\n%s", text)
	}
	if d := fixture.CounterSum(t, "machine_api_provider_cloud_requests_held_total", map[string]string{"cloud": "cloudscale", "reason": "auth"}) - heldForAuth; d != 0 {
		t.Errorf("%v calls held back as if the token were refused", d)
	}
	if n := fixture.CounterSum(t, "machine_api_provider_cloud_permission_denied_total", map[string]string{"cloud": "cloudscale", "operation": "server.create", "permission": "read/write"}); n < 1 {
		t.Errorf("the refused create is not counted by operation and permission")
	}
	if p := phase(getMachine(t, e, "worker-b")); p == machinev1.PhaseFailed {
		t.Errorf("worker-b failed; a permission can be granted, it must wait")
	}
	e.AssertNoCanary(t, readOnlyToken, canaryToken, "canary-userdata-4e8a2f")
}
