package actuator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestSpecNamingAnotherClustersNetworkFailsTheMachine: a Machine whose spec
// names another cluster's private network (a MachineSet copied from the
// other cluster) is Failed, its message naming the field and the other
// cluster, with the Warning event ResourceNotOwned, and the cloud sees not
// one write: no server, no interface on the other cluster's network.
func TestSpecNamingAnotherClustersNetworkFailsTheMachine(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	const other = "other-cluster-9q8w"
	req := &cloudscale.NetworkCreateRequest{Name: "privnet-" + other, AutoCreateIPV4Subnet: ptr.To(true)}
	req.Zone = "rma1"
	req.Tags = &cloudscale.TagMap{v1beta1.TagClusterID: other}
	theirs, err := sdk(e).Networks.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e.Emulator.Harness().ResetRequests()
	e.StartManager(t, manager.Options{})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) {
		s["interfaces"] = []any{map[string]any{"type": "Public"}, map[string]any{"type": "Private", "networkUUID": theirs.UUID}}
	}))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseFailed)
	msg := ptr.Deref(m.Status.ErrorMessage, "")
	for _, want := range []string{"spec.providerSpec.value.interfaces[1].networkUUID", `cluster "` + other + `"'s identity`, `this cluster is "` + fixture.ClusterID + `"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("errorMessage %q does not say %q", msg, want)
		}
	}
	fixture.Eventually(t, 30*time.Second, "a ResourceNotOwned event", func() (bool, error) {
		return strings.Contains(fixture.EventText(e.Events(t, "worker-a")), "Warning ResourceNotOwned"), nil
	})
	for route, n := range e.Emulator.Harness().Requests() {
		if !strings.HasPrefix(route, "GET ") {
			t.Errorf("%d × %s for a Machine naming another cluster's network", n, route)
		}
	}
	if n := len(serversOf(t, e, "worker-a")); n != 0 {
		t.Errorf("%d servers for worker-a", n)
	}
}
