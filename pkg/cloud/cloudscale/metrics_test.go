package cloudscale

import (
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

// cloudRequests reads machine_api_provider_cloud_requests_total.
func cloudRequests(t *testing.T, operation, result string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "machine_api_provider_cloud_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cloud"] == "cloudscale" && labels["operation"] == operation && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Not parallel: the counters are global.
func TestCallsAreObserved(t *testing.T) {
	v := newEnv(t, emucs.Config{})
	before := map[string]float64{}
	type key struct{ op, result string }
	keys := []key{
		{"server.create", "ok"}, {"volume.update", "ok"}, {"servergroup.list", "ok"}, {"servergroup.create", "ok"},
		{"server.get", "not_found"}, {"server.create", "invalid"}, {"flavor.list", "ok"},
		{"server.delete", "ok"}, {"servergroup.get", "ok"}, {"servergroup.delete", "ok"},
	}
	for _, k := range keys {
		before[k.op+"/"+k.result] = cloudRequests(t, k.op, k.result)
	}
	s := v.create("m", v.spec(antiAffinity("workers")))
	_, _ = v.client.GetServer(v.ctx, "00000000-0000-4000-8000-000000000000")
	if _, err := v.client.SyncServer(v.ctx, ref("m"), v.spec(antiAffinity("workers")), s); err != nil {
		t.Fatal(err)
	}
	_, _, _ = v.client.CreateServer(v.ctx, ref("x"), v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) { p.Image = "nope" }), nil)
	_, _ = v.client.Flavor(v.ctx, "rma1", "flex-4-1")
	if err := v.client.DeleteServer(v.ctx, ref("m"), s, noNodes); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if d := cloudRequests(t, k.op, k.result) - before[k.op+"/"+k.result]; d < 1 {
			t.Errorf("%s with result %s not observed", k.op, k.result)
		}
	}
}
