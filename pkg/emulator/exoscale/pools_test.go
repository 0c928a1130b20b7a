package exoscale_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func poolReq(name string, size int64) v3.CreateInstancePoolRequest {
	return v3.CreateInstancePoolRequest{
		Name:           name,
		Size:           size,
		InstanceType:   &v3.InstanceType{ID: typeMedium},
		Template:       &v3.Template{ID: ubuntu},
		DiskSize:       20,
		InstancePrefix: "worker",
		UserData:       "I2Nsb3VkLWNvbmZpZwo=",
	}
}

// memberIDs lists a pool's instances by ID.
func memberIDs(p *v3.InstancePool) []v3.UUID {
	var out []v3.UUID
	for _, i := range p.Instances {
		out = append(out, i.ID)
	}
	return out
}

// A pool makes its members from its own configuration and owns them: they
// carry it as their manager, the list filters on it, and a member deleted
// directly is replaced to keep the size.
func TestInstancePoolOwnsItsMembers(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{BootTime: 2 * time.Second, ActionTime: time.Second})
	c := v.client
	sg := v.op(c.CreateSecurityGroup(v.ctx, v3.CreateSecurityGroupRequest{Name: "c1_worker"})).Reference.ID
	aag := v.op(c.CreateAntiAffinityGroup(v.ctx, v3.CreateAntiAffinityGroupRequest{Name: "c1_worker"})).Reference.ID
	pn := v.op(c.CreatePrivateNetwork(v.ctx, v3.CreatePrivateNetworkRequest{
		Name: "c1_clusternet", StartIP: []byte{172, 18, 200, 101}, EndIP: []byte{172, 18, 200, 253}, Netmask: []byte{255, 255, 255, 0},
	})).Reference.ID
	req := poolReq("c1_worker-0", 3)
	req.SecurityGroups = []v3.SecurityGroup{{ID: sg}}
	req.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: aag}}
	req.PrivateNetworks = []v3.PrivateNetwork{{ID: pn}}
	op := v.op(c.CreateInstancePool(v.ctx, req))
	if refCommand(op) != "create-instance-pool" {
		t.Fatalf("operation %+v", op.Reference)
	}
	poolID := op.Reference.ID
	p, err := c.GetInstancePool(v.ctx, poolID)
	if err != nil || p.Name != "c1_worker-0" || p.Size != 3 || len(p.Instances) != 3 || p.State != v3.InstancePoolStateScalingUP || p.InstancePrefix != "worker" || p.UserData != req.UserData {
		t.Fatalf("pool %+v, %v", p, err)
	}
	v.clock.Advance(2 * time.Second)
	v.opState(c, op, v3.OperationStateSuccess)
	if p, _ = c.GetInstancePool(v.ctx, poolID); p.State != v3.InstancePoolStateRunning {
		t.Fatalf("pool state %q once its members run", p.State)
	}
	members := memberIDs(p)
	for _, id := range members {
		inst := v.getInstance(c, id)
		if inst.Manager == nil || inst.Manager.ID != poolID || inst.Manager.Type != v3.ManagerTypeInstancePool ||
			!strings.HasPrefix(inst.Name, "worker-") || inst.State != v3.InstanceStateRunning ||
			len(inst.AntiAffinityGroups) != 1 || inst.AntiAffinityGroups[0].ID != aag ||
			len(inst.SecurityGroups) != 1 || inst.SecurityGroups[0].ID != sg ||
			len(inst.PrivateNetworks) != 1 || inst.UserData != req.UserData {
			t.Fatalf("member %+v", inst)
		}
	}
	if infos := v.emu.InstancePools(); len(infos) != 1 || !slices.Equal(infos[0].Members, []string{string(members[0]), string(members[1]), string(members[2])}) {
		t.Fatalf("InstancePools() = %+v", infos)
	}

	// Standalone instances are no pool's.
	v.create(c, instanceReq("standalone"))
	names := func(opts ...v3.ListInstancesOpt) []v3.UUID {
		t.Helper()
		l, err := c.ListInstances(v.ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var out []v3.UUID
		for _, i := range l.Instances {
			if i.Manager != nil && i.Manager.ID != poolID {
				t.Fatalf("list item manager %+v", i.Manager)
			}
			out = append(out, i.ID)
		}
		return out
	}
	if got := names(v3.ListInstancesWithManagerID(poolID)); !slices.Equal(got, members) {
		t.Fatalf("instances of the pool: %v, want %v", got, members)
	}
	if got := names(v3.ListInstancesWithManagerType(v3.ListInstancesManagerTypeInstancePool)); !slices.Equal(got, members) {
		t.Fatalf("instances of any pool: %v, want %v", got, members)
	}
	if got := names(); len(got) != 4 {
		t.Fatalf("all instances: %v", got)
	}

	// A member deleted directly does not leave the pool smaller: the pool
	// makes another.
	v.op(c.DeleteInstance(v.ctx, members[0]))
	v.clock.Advance(time.Second)
	p, _ = c.GetInstancePool(v.ctx, poolID)
	now := memberIDs(p)
	if p.Size != 3 || len(now) != 3 || slices.Contains(now, members[0]) {
		t.Fatalf("after deleting a member directly: size %d, members %v (was %v)", p.Size, now, members)
	}
}

// Evicting names the members to remove: exactly those are destroyed and the
// pool shrinks by as many; scaling down removes members the pool picks.
// Neither can leave the pool empty; deleting it destroys what is left.
func TestInstancePoolEvictScaleDelete(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{ActionTime: time.Second})
	c := v.client
	poolID := v.op(c.CreateInstancePool(v.ctx, poolReq("workers", 3))).Reference.ID
	p, _ := c.GetInstancePool(v.ctx, poolID)
	members := memberIDs(p)
	_, stranger := v.create(c, instanceReq("stranger"))

	_, err := c.EvictInstancePoolMembers(v.ctx, poolID, v3.EvictInstancePoolMembersRequest{Instances: []v3.UUID{stranger}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "not a member")
	_, err = c.EvictInstancePoolMembers(v.ctx, poolID, v3.EvictInstancePoolMembersRequest{})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "Invalid value in instances")

	op := v.op(c.EvictInstancePoolMembers(v.ctx, poolID, v3.EvictInstancePoolMembersRequest{Instances: []v3.UUID{members[1]}}))
	if refCommand(op) != "evict-instance-pool-members" || op.Reference.ID != poolID {
		t.Fatalf("operation %+v", op.Reference)
	}
	v.wantState(c, members[1], v3.InstanceStateDestroying)
	p, _ = c.GetInstancePool(v.ctx, poolID)
	if p.Size != 2 || p.State != v3.InstancePoolStateScalingDown {
		t.Fatalf("pool while evicting: size %d, state %q", p.Size, p.State)
	}
	v.clock.Advance(time.Second)
	_, err = c.GetInstance(v.ctx, members[1])
	apiError(t, err, v3.ErrNotFound)
	p, _ = c.GetInstancePool(v.ctx, poolID)
	if got := memberIDs(p); !slices.Equal(got, []v3.UUID{members[0], members[2]}) || p.State != v3.InstancePoolStateRunning {
		t.Fatalf("after evicting %s: members %v, state %q; its neighbours must stay", members[1], got, p.State)
	}
	v.wantState(c, stranger, v3.InstanceStateRunning)

	// An evicted member is gone for good: evicting it again is refused.
	_, err = c.EvictInstancePoolMembers(v.ctx, poolID, v3.EvictInstancePoolMembersRequest{Instances: []v3.UUID{members[1]}})
	apiError(t, err, v3.ErrBadRequest)
	// The pool keeps one member at least.
	_, err = c.EvictInstancePoolMembers(v.ctx, poolID, v3.EvictInstancePoolMembersRequest{Instances: []v3.UUID{members[0], members[2]}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "delete the Instance Pool")
	resp, body := v.raw("PUT", "/v2/instance-pool/"+string(poolID)+":scale", map[string]int{"size": 0}, true)
	wantStatus(t, resp, body, http.StatusBadRequest)

	// Scaling: up makes members from the pool's configuration, down
	// removes some.
	v.op(c.ScaleInstancePool(v.ctx, poolID, v3.ScaleInstancePoolRequest{Size: 4}))
	if p, _ = c.GetInstancePool(v.ctx, poolID); p.Size != 4 || len(p.Instances) != 4 {
		t.Fatalf("scaled up: %+v", p)
	}
	v.op(c.ScaleInstancePool(v.ctx, poolID, v3.ScaleInstancePoolRequest{Size: 1}))
	v.clock.Advance(time.Second)
	if p, _ = c.GetInstancePool(v.ctx, poolID); p.Size != 1 || len(p.Instances) != 1 || p.Instances[0].ID != members[0] {
		t.Fatalf("scaled down to 1: %+v (the oldest member stays)", p)
	}

	l, err := c.ListInstancePools(v.ctx)
	if err != nil || len(l.InstancePools) != 1 || l.InstancePools[0].ID != poolID {
		t.Fatalf("ListInstancePools: %+v, %v", l, err)
	}
	v.op(c.DeleteInstancePool(v.ctx, poolID))
	v.wantState(c, members[0], v3.InstanceStateDestroying)
	v.clock.Advance(time.Second)
	_, err = c.GetInstancePool(v.ctx, poolID)
	apiError(t, err, v3.ErrNotFound)
	if n := v.emu.CountInstances(); n != 1 {
		t.Fatalf("%d instances left, want the stranger only", n)
	}
}

func TestCreateInstancePoolValidation(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	full := v.op(c.CreateAntiAffinityGroup(v.ctx, v3.CreateAntiAffinityGroupRequest{Name: "full"})).Reference.ID
	for i := range 7 {
		req := instanceReq("member-" + string(rune('a'+i)))
		req.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: full}}
		v.create(c, req)
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"no size", map[string]any{"name": "p", "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": 20}, "Invalid value in size"},
		{"size 0", map[string]any{"name": "p", "size": 0, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": 20}, "Invalid value in size"},
		{"no name", map[string]any{"size": 1, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": 20}, "Invalid value in name"},
		{"disk too small", map[string]any{"name": "p", "size": 1, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": 5}, "Invalid value in disk-size"},
		{"prefix with underscore", map[string]any{"name": "p", "size": 1, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": 20, "instance-prefix": "c1_worker"}, "Invalid value in instance-prefix"},
		{"user data not base64", map[string]any{"name": "p", "size": 1, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": 20, "user-data": "{not base64"}, "Invalid value in user-data"},
		{"disk size a string", map[string]any{"name": "p", "size": 1, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": "20"},
			"Invalid value in disk-size (description: `Instances disk size in GiB`)"},
		{"template id a number", map[string]any{"name": "p", "size": 1, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]int{"id": 1}, "disk-size": 20},
			"Invalid value in template (description: `Instances template`)"},
		{"group too full", map[string]any{"name": "p", "size": 2, "instance-type": map[string]string{"id": string(typeMedium)}, "template": map[string]string{"id": string(ubuntu)}, "disk-size": 20, "anti-affinity-groups": []map[string]string{{"id": string(full)}}}, "the most a group can hold is 8"},
	} {
		resp, body := v.raw("POST", "/v2/instance-pool", tc.body, true)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.name, resp.StatusCode, body, tc.want)
		}
	}
	if n := len(v.emu.InstancePools()); n != 0 {
		t.Fatalf("%d pools made by refused requests", n)
	}
	resp, body := v.raw("GET", "/v2/instance-pool/6f8e2c7a-1234-4abc-8def-0123456789ab", nil, true)
	wantStatus(t, resp, body, http.StatusNotFound)
}
