package actuator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// TestMachineAPIWritesNeverWaitOnTheWebhooks: the webhook configurations
// of docs/webhook.md, installed in a real API server, and the webhook
// Deployment scaled to 0 (nothing answers the webhooks). The Machine API's
// own writes do not wait on them: the machine controller's finalizers, the
// provider's create intent, providerID, labels and annotations, so that
// Machines admitted before still get their servers, and a deleted Machine
// goes with its server; a MachineSet scaled up (the real MachineSet
// controller) makes its Machine, which gets its server. What the webhooks
// check still waits for them: a Machine made by hand, a change of a
// provider spec.
func TestMachineAPIWritesNeverWaitOnTheWebhooks(t *testing.T) {
	for _, tc := range []struct {
		cloud   string
		spec    map[string]any
		servers func(e *fixture.Env, machine string) int
	}{
		{fixture.Cloudscale, map[string]any{
			"apiVersion": "machine.appuio.io/v1beta1", "kind": "CloudscaleMachineProviderSpec",
			"zone": "rma1", "flavor": "flex-8-4", "image": "custom:rhcos-4.19", "userDataSecret": map[string]string{"name": "worker-user-data"}, "interfaces": []map[string]string{{"type": "Public"}},
		}, func(e *fixture.Env, machine string) int {
			n := 0
			for _, s := range e.Emulator.Servers() {
				if s.Name == machine {
					n++
				}
			}
			return n
		}},
		{fixture.Exoscale, map[string]any{
			"apiVersion": "machine.appuio.io/v1beta1", "kind": "ExoscaleMachineProviderSpec",
			"zone": "ch-gva-2", "instanceType": "standard.large", "template": map[string]string{"name": "rhcos-4.19"}, "diskSize": 120,
			"userDataSecret": map[string]string{"name": "worker-user-data"},
		}, func(e *fixture.Env, machine string) int {
			n := 0
			for _, i := range e.Exoscale.Instances() {
				if i.Name == machine && i.State != "destroying" && i.State != "destroyed" {
					n++
				}
			}
			return n
		}},
	} {
		t.Run(tc.cloud, func(t *testing.T) {
			hooks := testenv.DocWebhooks(t, filepath.Join("..", "..", "docs", "webhook.md"))
			e := fixture.Start(t, fixture.Options{Cloud: tc.cloud, Webhooks: hooks})
			e.Secret(t, "worker-user-data", map[string]string{"userData": `{"ignition":{"version":"3.4.0"}}`})
			var c cloud.Cloud = e.Cloud("any")
			if tc.cloud == fixture.Exoscale {
				c = e.ExoscaleCloud(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret)
			}
			specJSON, _ := json.Marshal(tc.spec)
			ctx := context.Background()

			stopHooks := hooks.Serve(t, c, fixture.ClusterID)
			// The API server takes the configurations up a moment after
			// they are written: an invalid Machine is refused once they
			// answer.
			fixture.Eventually(t, time.Minute, "the webhooks answering", func() (bool, error) {
				bad := fixture.Machine("invalid", `{"kind": "`+c.SpecKind()+`", "zone": ""}`)
				err := e.Client.Create(ctx, bad, client.DryRunAll)
				return err != nil && strings.Contains(err.Error(), "denied the request"), err
			})
			for _, name := range []string{"worker-a", "worker-b"} {
				e.CreateMachine(t, name, string(specJSON))
			}
			// A MachineSet at 0 replicas, made while the webhooks answer.
			ms := fixture.MachineSet("workers", string(specJSON))
			if err := e.Client.Create(ctx, ms); err != nil {
				t.Fatal(err)
			}

			// The webhook Deployment at 0 replicas.
			stopHooks()
			fixture.Eventually(t, time.Minute, "a new Machine refused while nothing answers the webhooks", func() (bool, error) {
				err := e.Client.Create(ctx, fixture.Machine("worker-c", string(specJSON)), client.DryRunAll)
				return err != nil && strings.Contains(err.Error(), "failed calling webhook"), err
			})

			e.StartManager(t, manager.Options{})
			for _, name := range []string{"worker-a", "worker-b"} {
				m := e.WaitPhase(t, name, machinev1.PhaseProvisioned)
				if m.Spec.ProviderID == nil || tc.servers(e, name) != 1 {
					t.Errorf("%s: providerID %v, %d servers: want its one server recorded", name, m.Spec.ProviderID, tc.servers(e, name))
				}
			}
			// Scaling up (what the autoscaler does): the real MachineSet
			// controller makes the Machine, and it gets its server.
			e.StartMachineSetController(t)
			if err := e.Client.Patch(ctx, ms, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
				t.Fatalf("scaling the MachineSet up while the webhooks do not answer: %v", err)
			}
			var made string
			fixture.Eventually(t, 2*time.Minute, "the MachineSet's Machine made", func() (bool, error) {
				var list machinev1.MachineList
				if err := e.Client.List(ctx, &list, client.InNamespace(fixture.Namespace), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": "workers"}); err != nil {
					return false, err
				}
				if len(list.Items) > 0 {
					made = list.Items[0].Name
				}
				if made == "" {
					got := &machinev1.MachineSet{}
					err := e.Client.Get(ctx, client.ObjectKeyFromObject(ms), got)
					return false, fmt.Errorf("no Machine yet; the MachineSet's status %+v (%v)", got.Status, err)
				}
				return true, nil
			})
			if m := e.WaitPhase(t, made, machinev1.PhaseProvisioned); m.Spec.ProviderID == nil || tc.servers(e, made) != 1 {
				t.Errorf("%s (made by the MachineSet): providerID %v, %d servers: want its one server recorded", made, m.Spec.ProviderID, tc.servers(e, made))
			}

			e.DeleteMachine(t, "worker-b")
			e.WaitMachineGone(t, "worker-b", 2*time.Minute)
			if n := tc.servers(e, "worker-b"); n != 0 {
				t.Errorf("worker-b's server is left (%d)", n)
			}

			// What the webhooks check waits for them: a change of the
			// provider spec is refused while they do not answer.
			m := e.GetMachine(t, "worker-a")
			changed := m.DeepCopy()
			spec := map[string]any{}
			_ = json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &spec)
			spec["diskSize"], spec["rootVolumeSizeGB"] = 200, 200
			raw, _ := json.Marshal(spec)
			changed.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: raw}
			if err := e.Client.Update(ctx, changed, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
				t.Errorf("a provider spec change while the webhooks do not answer: %v, want it refused", err)
			}
		})
	}
}
