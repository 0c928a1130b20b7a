package exoscale_test

import (
	"net/http"
	"slices"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func TestZonesPointBackAtTheEmulator(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	zones, err := v.client.ListZones(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, z := range zones.Zones {
		names = append(names, string(z.Name))
		want := v.srv.URL + "/" + string(z.Name) + "/v2"
		if z.Name == "ch-gva-2" {
			want = v.srv.URL + "/v2"
		}
		if string(z.APIEndpoint) != want {
			t.Errorf("zone %s: api-endpoint %q, want %q", z.Name, z.APIEndpoint, want)
		}
	}
	if want := []string{"ch-gva-2", "ch-dk-2", "de-fra-1", "de-muc-1", "at-vie-1", "at-vie-2", "bg-sof-1", "hr-zag-1"}; !slices.Equal(names, want) {
		t.Fatalf("zones %v, want %v", names, want)
	}
	// The SDK finds the zone of its own (default) endpoint.
	name, err := v.client.GetZoneName(v.ctx, v3.Endpoint(v.srv.URL+"/v2"))
	if err != nil || name != "ch-gva-2" {
		t.Fatalf("GetZoneName(default endpoint) = %q, %v", name, err)
	}
}

// Compute resources are zone-local: what is made through one zone's
// endpoint is not listed through another's.
func TestZoneLocality(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	gva := v.client
	fra := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "de-fra-1")
	gvaByName := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "ch-gva-2")

	_, inGva := v.create(gva, instanceReq("in-gva"))
	fraOp, inFra := v.create(fra, instanceReq("in-fra"))

	list := func(c *v3.Client) []string {
		l, err := c.ListInstances(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range l.Instances {
			out = append(out, i.Name)
		}
		return out
	}
	if got := list(gva); !slices.Equal(got, []string{"in-gva"}) {
		t.Fatalf("ch-gva-2 lists %v", got)
	}
	if got := list(gvaByName); !slices.Equal(got, []string{"in-gva"}) {
		t.Fatalf("ch-gva-2 through its zone prefix lists %v", got)
	}
	if got := list(fra); !slices.Equal(got, []string{"in-fra"}) {
		t.Fatalf("de-fra-1 lists %v", got)
	}
	_, err := fra.GetInstance(v.ctx, inGva)
	apiError(t, err, v3.ErrNotFound)
	_, err = gva.StopInstance(v.ctx, inFra)
	apiError(t, err, v3.ErrNotFound)
	// Operations belong to their zone too.
	_, err = gva.GetOperation(v.ctx, fraOp.ID)
	apiError(t, err, v3.ErrNotFound)
	v.opState(fra, fraOp, v3.OperationStateSuccess)
	if link := fraOp.Reference.Link; link != v.srv.URL+"/de-fra-1/v2/instance/"+string(inFra) {
		t.Fatalf("reference link %q", link)
	}

	// Security groups, anti-affinity groups and SSH keys are global.
	sg := v.op(gva.CreateSecurityGroup(v.ctx, v3.CreateSecurityGroupRequest{Name: "global"}))
	if _, err := fra.GetSecurityGroup(v.ctx, sg.Reference.ID); err != nil {
		t.Fatalf("a security group made in ch-gva-2 is not seen from de-fra-1: %v", err)
	}
	req := instanceReq("fra-in-group")
	req.SecurityGroups = []v3.SecurityGroup{{ID: sg.Reference.ID}}
	v.create(fra, req)

	// Templates and instance types are per zone: a GPU type of other zones
	// is refused.
	req = instanceReq("gpu")
	req.InstanceType = &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("gpu2.small"))}
	_, err = fra.CreateInstance(v.ctx, req)
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "instance-type", "not available in zone de-fra-1")

	infos := v.emu.Instances()
	zones := map[string]string{}
	for _, i := range infos {
		zones[i.Name] = i.Zone
	}
	if zones["in-gva"] != "ch-gva-2" || zones["in-fra"] != "de-fra-1" || zones["fra-in-group"] != "de-fra-1" {
		t.Fatalf("zones of the instances: %v", zones)
	}
	// The counters name the vendor's route, whatever the zone prefix.
	if n := v.emu.Harness().Count("POST /v2/instance"); n != 4 {
		t.Fatalf("Count(POST /v2/instance) = %d, want 4", n)
	}
}

func TestUnknownPathsAndMethods(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v2/elastic-ip", http.StatusNotFound},
		{"GET", "/mars-1/v2/instance", http.StatusNotFound},
		{"GET", "/v1/instance", http.StatusNotFound},
		{"GET", "/de-fra-1/instance", http.StatusNotFound},
		{"PATCH", "/v2/instance", http.StatusMethodNotAllowed},
		{"POST", "/v2/instance-type", http.StatusMethodNotAllowed},
		{"PUT", "/v2/instance/6f8e2c7a-1234-4abc-8def-0123456789ab:explode", http.StatusNotFound},
	} {
		resp, body := v.raw(tc.method, tc.path, nil, true)
		wantStatus(t, resp, body, tc.status)
		wantMessage(t, body, "")
	}
	if n := v.emu.Harness().Count("GET (unmatched)"); n != 4 {
		t.Fatalf("Count(GET (unmatched)) = %d, want 4", n)
	}
}
