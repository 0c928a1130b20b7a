package cloudscale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func antiAffinity(key string, groups ...string) func(p *v1beta1.CloudscaleMachineProviderSpec) {
	return func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.AntiAffinityKey = key
		p.ServerGroups = groups
	}
}

func TestAntiAffinityConcurrentCreatesAndDeletes(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	spec := v.spec(antiAffinity("workers"))

	servers := make([]*cloud.Server, 9)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			s, _, err := v.client.CreateServer(v.ctx, ref(fmt.Sprintf("w%d", i)), spec, nil)
			if err != nil {
				t.Errorf("create w%d: %v", i, err)
				return
			}
			servers[i] = s
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	groups := v.groups()
	if len(groups) != 3 {
		t.Fatalf("%d server groups, want 3", len(groups))
	}
	var names []string
	total := 0
	for _, g := range groups {
		names = append(names, g.Name)
		total += len(g.Servers)
		if len(g.Servers) > 4 || g.Zone.Slug != "rma1" || g.Type != "anti-affinity" ||
			g.Tags[v1beta1.TagClusterID] != testCluster || g.Tags[v1beta1.TagAntiAffinityKey] != "workers" {
			t.Errorf("group %+v", g)
		}
	}
	slices.Sort(names)
	if want := []string{"c-test-workers-1", "c-test-workers-2", "c-test-workers-3"}; !slices.Equal(names, want) {
		t.Errorf("group names %v, want %v", names, want)
	}
	if total != 9 {
		t.Errorf("%d servers in groups, want 9", total)
	}
	if n := v.emu.Harness().Count("POST /v1/server-groups"); n != 3 {
		t.Errorf("%d groups created, want 3", n)
	}

	for i, s := range servers {
		wg.Go(func() {
			if err := v.client.DeleteServer(v.ctx, ref(fmt.Sprintf("w%d", i)), s, noNodes); err != nil {
				t.Errorf("delete w%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if g := v.groups(); len(g) != 0 {
		t.Errorf("%d server groups left after deleting every server, want 0", len(g))
	}
}

func TestAntiAffinityGroupsPerZoneAndKey(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	v.create("a", v.spec(antiAffinity("workers")))
	v.create("b", v.spec(antiAffinity("infra")))
	v.create("c", v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		antiAffinity("workers")(p)
		p.Zone = "lpg1"
	}))
	v.create("d", v.spec(antiAffinity("workers")))
	groups := v.groups()
	if len(groups) != 3 {
		t.Fatalf("%d groups, want one per key and zone", len(groups))
	}
	names := map[string]bool{}
	for _, g := range groups {
		if names[g.Name] {
			t.Errorf("two groups named %s", g.Name)
		}
		names[g.Name] = true
	}
}

func TestUserServerGroupsAreNeverDeleted(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	req := &sdk.ServerGroupRequest{Name: "mine", Type: "anti-affinity"}
	req.Zone = "rma1"
	// Even with the cluster tag: only the provider's groups have the key.
	req.Tags = &sdk.TagMap{v1beta1.TagClusterID: testCluster}
	user, err := v.sdk.ServerGroups.Create(v.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var servers []*cloud.Server
	for _, name := range []string{"a", "b"} {
		servers = append(servers, v.create(name, v.spec(antiAffinity("workers", user.UUID))))
	}
	if d := servers[0].Detail.(*sdk.Server); len(d.ServerGroups) != 2 {
		t.Fatalf("server groups %v, want the user's and the anti-affinity group", d.ServerGroups)
	}
	for i, s := range servers {
		if err := v.client.DeleteServer(v.ctx, ref([]string{"a", "b"}[i]), s, noNodes); err != nil {
			t.Fatal(err)
		}
	}
	groups := v.groups()
	if len(groups) != 1 || groups[0].UUID != user.UUID {
		t.Fatalf("groups left %v, want only the user's", groups)
	}
}

// fillingTransport fills the anti-affinity group of the first server create
// just before the request reaches the API, as another process could.
type fillingTransport struct {
	v    *env
	once sync.Once
}

func (f *fillingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/servers") {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			ServerGroups []string `json:"server_groups"`
		}
		_ = json.Unmarshal(body, &req)
		f.once.Do(func() {
			for i := range 4 {
				_, err := f.v.sdk.Servers.Create(r.Context(), &sdk.ServerRequest{
					Name: fmt.Sprintf("intruder-%d", i), Flavor: "flex-4-1", Image: "debian-12", Zone: "rma1",
					SSHKeys: []string{}, ServerGroups: req.ServerGroups,
				})
				if err != nil {
					f.v.t.Errorf("filling the group: %v", err)
				}
			}
		})
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestAntiAffinityGroupFilledBehindOurBack(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	c := New(Options{BaseURL: v.url, DefaultToken: testToken, HTTPClient: &http.Client{Transport: &fillingTransport{v: v}}})
	cl := newTestClient(t, c, testToken)
	spec := v.spec(antiAffinity("workers"))

	_, _, err := cl.CreateServer(v.ctx, ref("w"), spec, nil)
	if re := asRetryable(t, err); !re.NotPerformed {
		t.Errorf("a create refused for a full group is not marked as not performed: %v", err)
	}
	s, created, err := cl.CreateServer(v.ctx, ref("w"), spec, nil)
	if err != nil || !created {
		t.Fatalf("retry: %v (created %v)", err, created)
	}
	if g := s.Detail.(*sdk.Server).ServerGroups; len(g) != 1 || g[0].Name != "c-test-workers-2" {
		t.Errorf("retried server in %v, want the new group c-test-workers-2", g)
	}
}

// A create the cloud refuses leaves nothing behind: the anti-affinity group
// made for it is deleted again.
func TestAntiAffinityWithMissingUserGroupIsInvalid(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	_, _, err := v.client.CreateServer(v.ctx, ref("w"), v.spec(antiAffinity("workers", "00000000-0000-4000-8000-000000000000")), nil)
	if ic := asInvalid(t, err); ic.Field != "serverGroups" {
		t.Errorf("field %q, want serverGroups", ic.Field)
	}
	if g := v.groups(); len(g) != 0 {
		t.Errorf("the refused create left %d server group(s) behind: %+v", len(g), g)
	}
	if n := v.emu.Harness().Count("POST /v1/server-groups"); n != 1 {
		t.Errorf("%d group creates, want 1 (made, then deleted)", n)
	}
}

// A spec the catalog already refuses costs no write at all: no group, no
// server create.
func TestUnknownFlavorWithAntiAffinityMakesNothing(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	_, _, err := v.client.CreateServer(v.ctx, ref("w"), v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		antiAffinity("workers")(p)
		p.Flavor = "flex-999-1"
	}), nil)
	if ic := asInvalid(t, err); ic.Field != "flavor" {
		t.Errorf("field %q, want flavor", ic.Field)
	}
	for _, route := range []string{"POST /v1/server-groups", "POST /v1/servers"} {
		if n := v.emu.Harness().Count(route); n != 0 {
			t.Errorf("%s called %d times for an unknown flavor", route, n)
		}
	}
}

// Groups a failed delete left empty are found and deleted later, but only
// the provider's, and only once they are old enough.
func TestCleanupGroups(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	s := v.create("w", v.spec(antiAffinity("workers")))
	// The server goes behind the provider's back, leaving its group empty.
	if err := v.sdk.Servers.Delete(v.ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	user := &sdk.ServerGroupRequest{Name: "mine", Type: "anti-affinity"}
	user.Zone = "rma1"
	user.Tags = &sdk.TagMap{v1beta1.TagClusterID: testCluster}
	if _, err := v.sdk.ServerGroups.Create(v.ctx, user); err != nil {
		t.Fatal(err)
	}
	deleted, err := v.client.CleanupGroups(v.ctx, testCluster, time.Hour)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("CleanupGroups with a minimum age of an hour deleted %v (%v); the group is younger", deleted, err)
	}
	deleted, err = v.client.CleanupGroups(v.ctx, testCluster, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []string{"c-test-workers-1"}) {
		t.Errorf("deleted %v, want [c-test-workers-1]", deleted)
	}
	if g := v.groups(); len(g) != 1 || g[0].Name != "mine" {
		t.Errorf("groups left %+v, want only the user's", g)
	}
	if deleted, _ := v.client.CleanupGroups(v.ctx, "other-cluster", 0); len(deleted) != 0 {
		t.Errorf("another cluster's cleanup deleted %v", deleted)
	}
}
