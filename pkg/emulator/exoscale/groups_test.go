package exoscale_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func TestAntiAffinityGroups(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{ActionTime: time.Second})
	c := v.client
	op := v.op(c.CreateAntiAffinityGroup(v.ctx, v3.CreateAntiAffinityGroupRequest{Name: "workers", Description: "spread"}))
	gid := op.Reference.ID
	_, err := c.CreateAntiAffinityGroup(v.ctx, v3.CreateAntiAffinityGroupRequest{Name: "workers"})
	wantContains(t, apiError(t, err, v3.ErrConflict), `"workers" already exists`)
	_, err = c.CreateAntiAffinityGroup(v.ctx, v3.CreateAntiAffinityGroupRequest{})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "Invalid value in name")

	var members []v3.UUID
	for _, name := range []string{"a", "b"} {
		req := instanceReq(name)
		req.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: gid}}
		_, id := v.create(c, req)
		members = append(members, id)
	}
	g, err := c.GetAntiAffinityGroup(v.ctx, gid)
	if err != nil || g.Name != "workers" || g.Description != "spread" || len(g.Instances) != 2 || g.Instances[0].ID != members[0] {
		t.Fatalf("group %+v, %v", g, err)
	}
	if inst := v.getInstance(c, members[1]); len(inst.AntiAffinityGroups) != 1 || inst.AntiAffinityGroups[0].ID != gid {
		t.Fatalf("instance groups %+v", inst.AntiAffinityGroups)
	}
	l, err := c.ListAntiAffinityGroups(v.ctx)
	if err != nil || len(l.AntiAffinityGroups) != 1 {
		t.Fatalf("list %+v, %v", l, err)
	}
	infos := v.emu.AntiAffinityGroups()
	if len(infos) != 1 || !slices.Equal(infos[0].Members, []string{string(members[0]), string(members[1])}) {
		t.Fatalf("AntiAffinityGroups() = %+v", infos)
	}

	// A group with instances cannot go; it can when they are gone.
	_, err = c.DeleteAntiAffinityGroup(v.ctx, gid)
	wantContains(t, apiError(t, err, v3.ErrConflict), "still holds 2 instances")
	for _, id := range members {
		v.op(c.DeleteInstance(v.ctx, id))
	}
	_, err = c.DeleteAntiAffinityGroup(v.ctx, gid)
	apiError(t, err, v3.ErrConflict) // still destroying
	v.clock.Advance(time.Second)
	v.op(c.DeleteAntiAffinityGroup(v.ctx, gid))
	_, err = c.GetAntiAffinityGroup(v.ctx, gid)
	apiError(t, err, v3.ErrNotFound)
}

func TestSecurityGroups(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	web := v.op(c.CreateSecurityGroup(v.ctx, v3.CreateSecurityGroupRequest{Name: "web", Description: "HTTP"})).Reference.ID
	nodes := v.op(c.CreateSecurityGroup(v.ctx, v3.CreateSecurityGroupRequest{Name: "nodes"})).Reference.ID
	_, err := c.CreateSecurityGroup(v.ctx, v3.CreateSecurityGroupRequest{Name: "web"})
	apiError(t, err, v3.ErrConflict)

	rules := []v3.AddRuleToSecurityGroupRequest{
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, Network: "0.0.0.0/0", StartPort: 443, EndPort: 443, Description: "https"},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, Network: "10.0.0.5/8", StartPort: 30000, EndPort: 32767},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolUDP, SecurityGroup: &v3.SecurityGroupResource{ID: nodes}, StartPort: 4789},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolICMP, Network: "::/0"},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionEgress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, SecurityGroup: &v3.SecurityGroupResource{Name: "public-sks", Visibility: v3.SecurityGroupResourceVisibilityPublic}, StartPort: 1, EndPort: 65535},
	}
	for _, r := range rules {
		op := v.op(c.AddRuleToSecurityGroup(v.ctx, web, r))
		if op.Reference.ID != web || op.Reference.Command != "add-rule-to-security-group" {
			t.Fatalf("reference %+v", op.Reference)
		}
	}
	g, err := c.GetSecurityGroup(v.ctx, web)
	if err != nil || len(g.Rules) != len(rules) || g.Description != "HTTP" {
		t.Fatalf("group %+v, %v", g, err)
	}
	if r := g.Rules[1]; r.Network != "10.0.0.0/8" || r.StartPort != 30000 || r.EndPort != 32767 {
		t.Fatalf("rule %+v: the network is masked, the range kept", r)
	}
	if r := g.Rules[2]; r.SecurityGroup == nil || r.SecurityGroup.ID != nodes || r.SecurityGroup.Name != "nodes" || r.EndPort != 4789 {
		t.Fatalf("rule %+v", r)
	}
	if r := g.Rules[3]; r.ICMP == nil || r.ICMP.Type != -1 || r.ICMP.Code != -1 {
		t.Fatalf("ICMP rule %+v: any type and code by default", r)
	}

	for _, bad := range []v3.AddRuleToSecurityGroupRequest{
		{FlowDirection: "sideways", Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, Network: "0.0.0.0/0", StartPort: 1},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: "smtp", Network: "0.0.0.0/0"},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, Network: "0.0.0.0/0"},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, Network: "0.0.0.0/0", StartPort: 100, EndPort: 99},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, Network: "somewhere", StartPort: 1},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, StartPort: 1},
		{FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP, SecurityGroup: &v3.SecurityGroupResource{Name: "nobody"}, StartPort: 1},
	} {
		_, err := c.AddRuleToSecurityGroup(v.ctx, web, bad)
		wantContains(t, apiError(t, err, v3.ErrBadRequest), "Invalid value in")
	}
	_, err = c.AddRuleToSecurityGroup(v.ctx, web, rules[0])
	apiError(t, err, v3.ErrConflict)

	v.op(c.DeleteRuleFromSecurityGroup(v.ctx, web, g.Rules[0].ID))
	_, err = c.DeleteRuleFromSecurityGroup(v.ctx, web, g.Rules[0].ID)
	apiError(t, err, v3.ErrNotFound)

	// External sources.
	v.op(c.AddExternalSourceToSecurityGroup(v.ctx, web, v3.AddExternalSourceToSecurityGroupRequest{Cidr: "192.0.2.7/24"}))
	if g, _ := c.GetSecurityGroup(v.ctx, web); !slices.Equal(g.ExternalSources, []string{"192.0.2.0/24"}) {
		t.Fatalf("external sources %v", g.ExternalSources)
	}
	v.op(c.RemoveExternalSourceFromSecurityGroup(v.ctx, web, v3.RemoveExternalSourceFromSecurityGroupRequest{Cidr: "192.0.2.0/24"}))
	_, err = c.RemoveExternalSourceFromSecurityGroup(v.ctx, web, v3.RemoveExternalSourceFromSecurityGroupRequest{Cidr: "192.0.2.0/24"})
	apiError(t, err, v3.ErrBadRequest)

	// Attach and detach instances.
	_, id := v.create(c, instanceReq("node"))
	v.op(c.AttachInstanceToSecurityGroup(v.ctx, web, v3.AttachInstanceToSecurityGroupRequest{Instance: &v3.Instance{ID: id}}))
	inst := v.getInstance(c, id)
	if len(inst.SecurityGroups) != 2 || inst.SecurityGroups[1].ID != web {
		t.Fatalf("after attach: %+v", inst.SecurityGroups)
	}
	_, err = c.DeleteSecurityGroup(v.ctx, web)
	wantContains(t, apiError(t, err, v3.ErrConflict), "in use by instance")
	_, err = c.DeleteSecurityGroup(v.ctx, nodes)
	wantContains(t, apiError(t, err, v3.ErrConflict), "referenced by a rule")
	v.op(c.DetachInstanceFromSecurityGroup(v.ctx, web, v3.DetachInstanceFromSecurityGroupRequest{Instance: &v3.Instance{ID: id}}))
	if inst := v.getInstance(c, id); len(inst.SecurityGroups) != 1 {
		t.Fatalf("after detach: %+v", inst.SecurityGroups)
	}
	_, err = c.AttachInstanceToSecurityGroup(v.ctx, web, v3.AttachInstanceToSecurityGroupRequest{Instance: &v3.Instance{ID: "6f8e2c7a-1234-4abc-8def-0123456789ab"}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "Invalid value in instance")

	v.op(c.DeleteSecurityGroup(v.ctx, web))
	v.op(c.DeleteSecurityGroup(v.ctx, nodes))
	l, err := c.ListSecurityGroups(v.ctx)
	if err != nil || len(l.SecurityGroups) != 1 || l.SecurityGroups[0].Name != "default" {
		t.Fatalf("left: %+v, %v", l, err)
	}
	_, err = c.DeleteSecurityGroup(v.ctx, l.SecurityGroups[0].ID)
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "default Security Group cannot be deleted")
	public, err := c.ListSecurityGroups(v.ctx, v3.ListSecurityGroupsWithVisibility(v3.ListSecurityGroupsVisibilityPublic))
	if err != nil || len(public.SecurityGroups) != 0 {
		t.Fatalf("public security groups %+v, %v", public, err)
	}
	resp, body := v.raw("GET", "/v2/security-group?visibility=secret", nil, true)
	wantStatus(t, resp, body, http.StatusBadRequest)
}
