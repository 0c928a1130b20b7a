package cloudscale

import (
	"errors"
	"maps"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// retag replaces a server's tags behind the client's back, as another
// cluster's provider, a person or Terraform would.
func (v *env) retag(id string, tags map[string]string) {
	v.t.Helper()
	tm := sdk.TagMap(tags)
	req := &sdk.ServerUpdateRequest{}
	req.Tags = &tm
	if err := v.sdk.Servers.Update(v.ctx, id, req); err != nil {
		v.t.Fatal(err)
	}
}

func wantNotOwned(t *testing.T, what string, err error) {
	t.Helper()
	var no *cloud.NotOwnedError
	if !errors.As(err, &no) {
		t.Errorf("%s: %v (%T), want a NotOwnedError", what, err, err)
	}
}

// A server is synced and deleted only while its tags say it is the
// Machine's, at that moment: the record the caller holds (a list's, seconds
// old) is checked, and the server is read again right before each write and
// before the delete. A server of another cluster, of another Machine or
// without the provider's tags is left alone: no PATCH, no DELETE.
func TestServerOfAnotherIdentityIsNeverWrittenOrDeleted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tags map[string]string
	}{
		{"another cluster", map[string]string{v1beta1.TagClusterID: "another-cluster", v1beta1.TagMachineName: "m"}},
		{"another Machine", map[string]string{v1beta1.TagClusterID: testCluster, v1beta1.TagMachineName: "other"}},
		{"no identity", map[string]string{"terraform": "lb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, emucs.Config{})
			spec := v.spec(nil)
			s := v.create("m", spec)
			// The caller's record still says it is m's.
			stale := *s
			v.retag(s.ID, tc.tags)
			changed := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
				p.Tags = map[string]string{"team": "b"}
				p.RootVolumeTags = map[string]string{"backup": "weekly"}
			})
			_, calls := v.calls(func() {
				_, err := v.client.SyncServer(v.ctx, ref("m"), changed, &stale)
				wantNotOwned(t, "sync with a stale record", err)
				fresh, err := v.client.GetServer(v.ctx, s.ID)
				if err != nil {
					t.Fatal(err)
				}
				_, err = v.client.SyncServer(v.ctx, ref("m"), changed, fresh)
				wantNotOwned(t, "sync with a fresh record", err)
				wantNotOwned(t, "delete with a stale record", v.client.DeleteServer(v.ctx, ref("m"), &stale, noNodes))
				wantNotOwned(t, "delete without a record", v.client.DeleteServer(v.ctx, ref("m"), &cloud.Server{ID: s.ID}, noNodes))
			})
			for route, n := range calls {
				if route[:4] != "GET " {
					t.Errorf("%s: %d, want no write", route, n)
				}
			}
			if got := v.server(s.ID).Tags; !maps.Equal(got, tc.tags) {
				t.Errorf("tags %v, want them left as %v", got, tc.tags)
			}
		})
	}
}

// A delete needs no read of its own when the record it acts on comes from
// a read sent after the delete was decided (cloud.DeleteDecided): the list
// of the Machines deleted together proves the server still theirs, as a
// read of it right then would. A record read before the decision is read
// again, and a server retagged since is left alone. The Node veto still
// applies to a delete so proven: a Node on the server keeps it.
func TestDeleteProvenByItsOwnListReadsNothingMore(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	spec := v.spec(nil)
	a := v.create("a", spec)
	b := v.create("b", spec)
	early, err := v.client.ListServers(v.ctx, sel("b"))
	if err != nil || len(early) != 1 {
		t.Fatalf("listed %v, %v", early, err)
	}
	v.retag(b.ID, map[string]string{v1beta1.TagClusterID: "another-cluster", v1beta1.TagMachineName: "b"})
	ctx := cloud.DeleteDecided(v.ctx, time.Now())
	listed, err := v.client.ListServers(ctx, sel("a"))
	if err != nil || len(listed) != 1 || listed[0].ID != a.ID {
		t.Fatalf("listed %v, %v", listed, err)
	}
	_, calls := v.calls(func() {
		var vetoed *nodes.VetoedError
		if err := v.client.DeleteServer(ctx, ref("a"), &listed[0], nodeOn("cloudscale://"+a.ID)); !errors.As(err, &vetoed) {
			t.Errorf("delete of a, which a Node runs on: %v, want a VetoedError", err)
		}
		if err := v.client.DeleteServer(ctx, ref("a"), &listed[0], noNodes); err != nil {
			t.Errorf("delete of a: %v", err)
		}
		wantNotOwned(t, "delete of b, listed before the delete was decided", v.client.DeleteServer(ctx, ref("b"), &early[0], noNodes))
	})
	// One read: b's; one DELETE: a's.
	if want := map[string]int64{"GET /v1/servers/{uuid}": 1, "DELETE /v1/servers/{uuid}": 1}; !maps.Equal(calls, want) {
		t.Errorf("deletes made %v, want %v", calls, want)
	}
	if got := v.server(b.ID); got == nil {
		t.Error("b, retagged as another cluster's, was deleted")
	}
}

// nodeOn is a Node veto with one Node, which runs on the server of the
// providerID.
func nodeOn(providerID string) nodes.Veto {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-node"}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	return nodes.Veto{Index: nodes.New(Name, []corev1.Node{n})}
}
