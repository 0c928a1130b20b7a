package cloudscale_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	cloudscale "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

func (v *env) createGroup(name, zone string) *cloudscale.ServerGroup {
	v.t.Helper()
	g, err := v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{
		Name: name, Type: "anti-affinity", ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: zone},
	})
	if err != nil {
		v.t.Fatalf("creating server group: %v", err)
	}
	return g
}

func (v *env) groupMembers(id string) []string {
	v.t.Helper()
	g, err := v.client.ServerGroups.Get(v.ctx, id)
	if err != nil {
		v.t.Fatalf("getting server group: %v", err)
	}
	return uuids(g.Servers, func(s cloudscale.ServerStub) string { return s.UUID })
}

func TestServerGroupHoldsFourServers(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	g := v.createGroup("masters", "rma1")
	if g.Type != "anti-affinity" || g.Zone.Slug != "rma1" || len(g.Servers) != 0 {
		t.Fatalf("new group %+v, want an empty anti-affinity group in rma1", g)
	}

	var members []string
	for i := range 4 {
		req := serverReq(fmt.Sprintf("m%d", i))
		req.ServerGroups = []string{g.UUID}
		s := v.createServer(req)
		if len(s.ServerGroups) != 1 || s.ServerGroups[0].UUID != g.UUID || s.ServerGroups[0].Name != "masters" {
			t.Fatalf("server %s lists server groups %+v, want [masters]", s.Name, s.ServerGroups)
		}
		members = append(members, s.UUID)
	}
	slices.Sort(members)

	fifth := serverReq("m4")
	fifth.ServerGroups = []string{g.UUID}
	_, err := v.client.Servers.Create(v.ctx, fifth)
	fieldError(t, err, "server_groups")

	if got := v.groupMembers(g.UUID); !slices.Equal(got, members) {
		t.Fatalf("group lists %v, want its 4 servers %v", got, members)
	}
	// The refused create left nothing behind.
	if n := len(v.listServers()); n != 4 {
		t.Fatalf("%d servers after the refused 5th, want 4", n)
	}
	if n := len(v.listVolumes()); n != 4 {
		t.Fatalf("%d volumes after the refused 5th, want 4 root volumes", n)
	}

	// Deleting a member frees a slot.
	if err := v.client.Servers.Delete(v.ctx, members[0]); err != nil {
		t.Fatal(err)
	}
	if got := v.groupMembers(g.UUID); len(got) != 3 || slices.Contains(got, members[0]) {
		t.Fatalf("group lists %v after deleting %s", got, members[0])
	}
	s5 := v.createServer(fifth)
	if got := v.groupMembers(g.UUID); len(got) != 4 || !slices.Contains(got, s5.UUID) {
		t.Fatalf("group lists %v, want the new server %s among 4", got, s5.UUID)
	}

	// A group with servers cannot be deleted.
	apiError(t, v.client.ServerGroups.Delete(v.ctx, g.UUID), http.StatusBadRequest)
	if _, err := v.client.ServerGroups.Get(v.ctx, g.UUID); err != nil {
		t.Fatalf("refused delete removed the group: %v", err)
	}

	// Empty, it can.
	for _, s := range v.listServers() {
		if err := v.client.Servers.Delete(v.ctx, s.UUID); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.client.ServerGroups.Delete(v.ctx, g.UUID); err != nil {
		t.Fatalf("deleting the empty group: %v", err)
	}
	_, err = v.client.ServerGroups.Get(v.ctx, g.UUID)
	apiError(t, err, http.StatusNotFound)
}

func TestServerGroupLimitIsPerGroup(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	a := v.createGroup("a", "rma1")
	b := v.createGroup("b", "rma1")
	for i := range 4 {
		req := serverReq(fmt.Sprintf("a%d", i))
		req.ServerGroups = []string{a.UUID}
		v.createServer(req)
	}
	req := serverReq("b0")
	req.ServerGroups = []string{b.UUID}
	v.createServer(req)
	if got := v.groupMembers(b.UUID); len(got) != 1 {
		t.Fatalf("group b lists %v, want one server", got)
	}
}

func TestServerGroupMustExistInTheServersZone(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	lpg := v.createGroup("elsewhere", "lpg1")

	req := serverReq("x")
	req.ServerGroups = []string{lpg.UUID}
	_, err := v.client.Servers.Create(v.ctx, req)
	fieldError(t, err, "server_groups")

	req.ServerGroups = []string{"00000000-0000-4000-8000-000000000000"}
	_, err = v.client.Servers.Create(v.ctx, req)
	fieldError(t, err, "server_groups")

	if n := len(v.listServers()); n != 0 {
		t.Fatalf("%d servers after refused creates, want 0", n)
	}
}

func TestServerGroupLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	g := v.createGroup("race", "rma1")
	const tries = 12
	var wg sync.WaitGroup
	errs := make([]error, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := serverReq(fmt.Sprintf("r%d", i))
			req.ServerGroups = []string{g.UUID}
			_, errs[i] = v.client.Servers.Create(v.ctx, req)
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, err := range errs {
		var er *cloudscale.ErrorResponse
		switch {
		case err == nil:
			ok++
		case errors.As(err, &er) && er.StatusCode == 400 && er.Message["server_groups"] != "":
			refused++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 4 || refused != tries-4 {
		t.Fatalf("%d creates succeeded and %d were refused, want 4 and %d", ok, refused, tries-4)
	}
	if got := v.groupMembers(g.UUID); len(got) != 4 {
		t.Fatalf("group lists %d servers, want 4", len(got))
	}
}

func TestServerGroupValidationAndRename(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	_, err := v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: "g", Type: "affinity"})
	fieldError(t, err, "type")
	_, err = v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Type: "anti-affinity"})
	fieldError(t, err, "name")
	_, err = v.client.ServerGroups.Create(v.ctx, &cloudscale.ServerGroupRequest{Name: "g", ZonalResourceRequest: cloudscale.ZonalResourceRequest{Zone: "zrh9"}})
	fieldError(t, err, "zone")

	g := v.createGroup("before", "")
	if g.Zone.Slug != "rma1" {
		t.Fatalf("group without zone is in %q, want the default rma1", g.Zone.Slug)
	}
	if err := v.client.ServerGroups.Update(v.ctx, g.UUID, &cloudscale.ServerGroupRequest{Name: "after"}); err != nil {
		t.Fatal(err)
	}
	got, err := v.client.ServerGroups.Get(v.ctx, g.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "after" {
		t.Fatalf("name %q after rename, want after", got.Name)
	}
	l, err := v.client.ServerGroups.List(v.ctx)
	if err != nil || len(l) != 1 {
		t.Fatalf("list = %+v, %v; want the one group", l, err)
	}
}
