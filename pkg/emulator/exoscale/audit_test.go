package exoscale_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// Every write route is audited, whatever it is: each route of the route
// table that is not a GET is called once, on an object of its kind, and
// the audit must hold that call with the object's labels as they were
// before it. A route added to the table is called too. (The requests are
// deliberately wrong in most ways; the emulator is served without the
// OpenAPI check for that.)
func TestEveryWriteRouteIsAudited(t *testing.T) {
	e, err := emu.New(emu.Config{Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c, err := v3.NewClient(credentials.NewStaticCredentials(emu.DefaultAPIKey, emu.DefaultAPISecret), v3.ClientOptWithEndpoint(v3.Endpoint(srv.URL+"/v2")))
	if err != nil {
		t.Fatal(err)
	}
	ref := func(op *v3.Operation, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return string(op.Reference.ID)
	}
	labels := func(of string) map[string]string { return map[string]string{"owner": "cluster-" + of} }
	objects := map[string]string{
		"instance": ref(c.CreateInstance(ctx, v3.CreateInstanceRequest{Name: "i", InstanceType: &v3.InstanceType{ID: typeMedium}, Template: &v3.Template{ID: ubuntu},
			DiskSize: 20, Labels: labels("instance")})),
		"instance-pool": ref(c.CreateInstancePool(ctx, v3.CreateInstancePoolRequest{Name: "p", Size: 1, InstanceType: &v3.InstanceType{ID: typeMedium},
			Template: &v3.Template{ID: ubuntu}, DiskSize: 20, Labels: labels("pool")})),
		"private-network": ref(c.CreatePrivateNetwork(ctx, v3.CreatePrivateNetworkRequest{Name: "n", Labels: labels("network"),
			StartIP: net.ParseIP("10.0.0.10"), EndIP: net.ParseIP("10.0.0.20"), Netmask: net.ParseIP("255.255.255.0")})),
		"anti-affinity-group": ref(c.CreateAntiAffinityGroup(ctx, v3.CreateAntiAffinityGroupRequest{Name: "g", Description: "whose: cluster-group"})),
		"security-group":      ref(c.CreateSecurityGroup(ctx, v3.CreateSecurityGroupRequest{Name: "sg"})),
		"template": ref(c.RegisterTemplate(ctx, v3.RegisterTemplateRequest{Name: "t", URL: "https://example.com/t.qcow2", Checksum: "0123456789abcdef0123456789abcdef",
			BootMode: "legacy", SSHKeyEnabled: ptr(true), PasswordEnabled: ptr(false), DefaultUser: "core"})),
		"ssh-key": "key",
	}
	if _, err := c.RegisterSSHKey(ctx, v3.RegisterSSHKeyRequest{Name: "key", PublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE24vb5lOw6UH+utLRZvFRB3zvV+F3tQrELjlDWaavxp x"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"instance": labels("instance"), "instance-pool": labels("pool"), "private-network": labels("network"),
	}
	routes := e.Routes()
	// Deletes last, those of whole objects after those of their parts,
	// so that every route finds its object.
	rank := func(r string) int {
		switch {
		case !strings.HasPrefix(r, "DELETE "):
			return 0
		case strings.HasSuffix(r, "/{id}") || strings.HasSuffix(r, "/{name}"):
			return 2
		}
		return 1
	}
	slices.SortStableFunc(routes, func(a, b string) int { return rank(a) - rank(b) })
	writes := 0
	for _, route := range routes {
		method, pattern, _ := strings.Cut(route, " ")
		if method == http.MethodGet {
			continue
		}
		writes++
		kind := strings.Split(strings.TrimPrefix(pattern, "/v2/"), "/")[0]
		id := ""
		if strings.Contains(pattern, "{") {
			id = objects[kind]
			if id == "" {
				t.Fatalf("%s: the test makes no %s: add one", route, kind)
			}
		}
		var wantLabels map[string]string
		if want[kind] != nil {
			wantLabels = labelsNow(t, srv.URL, kind, id)
		}
		path := strings.NewReplacer("{id}", id, "{name}", id, "{field}", "labels", "{rule-id}", "00000000-0000-4000-8000-000000000000").Replace(pattern)
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader([]byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if err := emu.SignRequest(req, emu.DefaultAPIKey, emu.DefaultAPISecret, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		before := e.Harness().Audit().Len()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := e.Harness().Audit().Since(before)
		if len(got) != 1 || got[0].Route != route || got[0].Status != resp.StatusCode || got[0].Caller != harness.CallerKey(emu.DefaultAPIKey) {
			t.Errorf("%s %s (%d): audited %+v, want one write of route %s", method, path, resp.StatusCode, got, route)
			continue
		}
		switch tg := got[0].Target; {
		case id == "" && tg != nil:
			t.Errorf("%s: target %+v, want none", route, tg)
		case id != "" && (tg == nil || tg.ID != id):
			t.Errorf("%s %s: target %+v, want %s", method, path, tg, id)
		case tg == nil:
		case want[kind] != nil && !maps.Equal(tg.Identity, wantLabels):
			t.Errorf("%s: target's labels %v, want them as they were, %v", route, tg.Identity, wantLabels)
		case kind == "anti-affinity-group" && tg.Description != "whose: cluster-group":
			t.Errorf("%s: target's description %q", route, tg.Description)
		}
	}
	if writes < 25 {
		t.Errorf("only %d write routes called: the route table lost some", writes)
	}
}

// labelsNow reads an object's labels through the API.
func labelsNow(t *testing.T, base, kind, id string) map[string]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v2/"+kind+"/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.SignRequest(req, emu.DefaultAPIKey, emu.DefaultAPISecret, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var obj struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
		t.Fatal(err)
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	return obj.Labels
}

// A write records what it touched as it was: an attach names the network
// (its labels before) and uses the instance; an instance's deletion gives
// its lease back, changing the network.
func TestAuditRecordsIdentityAtThatMoment(t *testing.T) {
	v := newEnv(t, emu.Config{})
	netID := v.op(v.client.CreatePrivateNetwork(v.ctx, v3.CreatePrivateNetworkRequest{Name: "n", Labels: map[string]string{"cluster": "b"},
		StartIP: net.ParseIP("10.0.0.10"), EndIP: net.ParseIP("10.0.0.20"), Netmask: net.ParseIP("255.255.255.0")})).Reference.ID
	req := instanceReq("i")
	req.Labels = map[string]string{"cluster": "a"}
	_, id := v.create(v.client, req)
	mark := v.emu.Harness().Audit().Len()
	v.op(v.client.AttachInstanceToPrivateNetwork(v.ctx, netID, v3.AttachInstanceToPrivateNetworkRequest{Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: id}}))
	v.op(v.client.DeleteInstance(v.ctx, id))
	w := v.emu.Harness().Audit().Since(mark)
	if len(w) != 2 {
		t.Fatalf("audited %+v, want 2 writes", w)
	}
	attach, del := w[0], w[1]
	if attach.Target == nil || attach.Target.ID != string(netID) || attach.Target.Identity["cluster"] != "b" ||
		len(attach.Used) != 1 || attach.Used[0].ID != string(id) || attach.Used[0].Identity["cluster"] != "a" {
		t.Errorf("attach: target %+v, used %+v", attach.Target, attach.Used)
	}
	if del.Target == nil || del.Target.ID != string(id) || del.Target.Identity["cluster"] != "a" || del.Caller != harness.CallerKey(emu.DefaultAPIKey) {
		t.Errorf("delete: %+v", del)
	}
	if !slices.ContainsFunc(del.Changed, func(o harness.Object) bool { return o.ID == string(netID) && o.Kind == "private_networks" }) {
		t.Errorf("delete changed %+v, want the network whose lease it gave back", del.Changed)
	}
}
