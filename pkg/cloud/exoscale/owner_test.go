package exoscale

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// An instance is synced and deleted only while its labels say it is the
// Machine's, at that moment: the record the caller holds (a list's,
// seconds old) is checked, and the instance is read again right before the
// first write and before the delete. An instance of another cluster, of
// another Machine or without the provider's labels is left alone: no
// label update, no attach, no delete.
func TestInstanceOfAnotherIdentityIsNeverWrittenOrDeleted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"another cluster", map[string]string{v1beta1.LabelClusterID: "another-cluster", v1beta1.LabelMachineName: "worker-a"}},
		{"another Machine", map[string]string{v1beta1.LabelClusterID: clusterID, v1beta1.LabelMachineName: "other"}},
		{"no identity", map[string]string{"terraform": "lb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newEnv(t, emu.Config{})
			sg := x.securityGroup("c1-all-machines")
			s, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(nil)), nil)
			if err != nil {
				t.Fatal(err)
			}
			listed, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID, Machine: "worker-a"})
			if err != nil || len(listed) != 1 {
				t.Fatalf("listed %v, %v", listed, err)
			}
			stale := listed[0]
			before, _ := x.emu.Instance(s.ID)
			x.wait(x.raw.UpdateInstance(x.ctx, v3.UUID(s.ID), v3.UpdateInstanceRequest{Labels: tc.labels}))
			// A spec that asks for a label and a security group the
			// instance lacks: a sync of its own would write both.
			changed := x.spec(specJSON(map[string]any{
				"labels": map[string]string{"team": "b"}, "securityGroups": []any{map[string]string{"id": sg}},
			}))
			x.emu.Harness().ResetRequests()
			var no *cloud.NotOwnedError
			if _, err := x.c.SyncServer(x.ctx, ref("worker-a"), changed, &stale); !errors.As(err, &no) {
				t.Errorf("sync with a stale record: %v, want a NotOwnedError", err)
			}
			fresh, err := x.c.GetServer(x.ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := x.c.SyncServer(x.ctx, ref("worker-a"), changed, fresh); !errors.As(err, &no) {
				t.Errorf("sync with a fresh record: %v, want a NotOwnedError", err)
			}
			for _, rec := range []*cloud.Server{&stale, {ID: s.ID}} {
				if err := x.c.DeleteServer(x.ctx, ref("worker-a"), rec, noNodes); !errors.As(err, &no) {
					t.Errorf("delete: %v, want a NotOwnedError", err)
				}
			}
			for route, n := range x.emu.Harness().Requests() {
				if !strings.HasPrefix(route, "GET ") {
					t.Errorf("%s: %d, want no write", route, n)
				}
			}
			inst, ok := x.emu.Instance(s.ID)
			if !ok || !maps.Equal(inst.Labels, tc.labels) || !slices.Equal(inst.SecurityGroups, before.SecurityGroups) {
				t.Errorf("instance %+v (%v), want it left as it was", inst, ok)
			}
		})
	}
}

// A delete needs no read of its own when the record it acts on comes from
// a read sent after the delete was decided (cloud.DeleteDecided) and the
// client knows the instance's groups (it made it): the list of the
// Machines deleted together proves the instance still theirs, as a read of
// it right then would. A record read before the decision is read again,
// and an instance relabelled since is left alone. The Node veto still
// applies to a delete so proven: a Node on the instance keeps it.
func TestDeleteProvenByItsOwnListReadsNothingMore(t *testing.T) {
	x := newEnv(t, emu.Config{})
	var ids []string
	for _, name := range []string{"worker-a", "worker-b"} {
		s, _, err := x.c.CreateServer(x.ctx, ref(name), x.spec(specJSON(nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	early, err := x.c.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID, Machine: "worker-b"})
	if err != nil || len(early) != 1 {
		t.Fatalf("listed %v, %v", early, err)
	}
	other := map[string]string{v1beta1.LabelClusterID: "another-cluster", v1beta1.LabelMachineName: "worker-b"}
	x.wait(x.raw.UpdateInstance(x.ctx, v3.UUID(ids[1]), v3.UpdateInstanceRequest{Labels: other}))
	ctx := cloud.DeleteDecided(x.ctx, time.Now())
	listed, err := x.c.ListServers(ctx, cloud.Selector{ClusterID: clusterID, Machine: "worker-a"})
	if err != nil || len(listed) != 1 || listed[0].ID != ids[0] {
		t.Fatalf("listed %v, %v", listed, err)
	}
	h := x.emu.Harness()
	h.ResetRequests()
	var vetoed *nodes.VetoedError
	if err := x.c.DeleteServer(ctx, ref("worker-a"), &listed[0], nodeVeto("a-node", "exoscale://"+ids[0], "")); !errors.As(err, &vetoed) {
		t.Errorf("delete of worker-a, which a Node runs on: %v, want a VetoedError", err)
	}
	if err := x.c.DeleteServer(ctx, ref("worker-a"), &listed[0], noNodes); err != nil {
		t.Errorf("delete of worker-a: %v", err)
	}
	var no *cloud.NotOwnedError
	if err := x.c.DeleteServer(ctx, ref("worker-b"), &early[0], noNodes); !errors.As(err, &no) {
		t.Errorf("delete of worker-b, listed before the delete was decided: %v, want a NotOwnedError", err)
	}
	// One read: worker-b's; one DELETE: worker-a's.
	if got, want := h.Requests(), map[string]int64{"GET /v2/instance/{id}": 1, "DELETE /v2/instance/{id}": 1}; !maps.Equal(got, want) {
		t.Errorf("deletes made %v, want %v", got, want)
	}
	if inst, ok := x.emu.Instance(ids[1]); !ok || !maps.Equal(inst.Labels, other) {
		t.Errorf("worker-b, relabelled as another cluster's: %+v (%v), want it left alone", inst, ok)
	}
}
