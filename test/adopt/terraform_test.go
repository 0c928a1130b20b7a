package adopt_test

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The Terraform handover (docs/adopt.md, "The Terraform handover"): after
// the documented `terraform state rm` steps and variables, what is left in
// Terraform's state must be exactly what the module would write, or the
// next `terraform apply` changes it back (and `terraform plan` is not
// clean). The tests snapshot, before adopt, every attribute the module
// sets on each resource it keeps (the world was built as the module builds
// it), and compare after adopt, its second run and the provider's syncs.
// Which attributes the modules set, read from their sources (main of
// appuio/terraform-openshift4-cloudscale at a8195e7 and of
// appuio/terraform-openshift4-exoscale at 46016ea, modules/node-group/
// main.tf, main.tf, security_groups.tf), without those in lifecycle
// ignore_changes (image, user data, volume size, SSH keys): an attribute
// the module leaves unset (the tags of a server group, the labels of an
// instance) it sets to empty.

// Adopt's own Exoscale API key, with the documented adopt role, and
// Terraform's, with every permission.
const (
	adoptKey        = "EXO0a0a0a0a0a0a0a0a0a0a0a0a"
	adoptSecret     = "adopt-key-secret-of-the-test-role-0123456789"
	terraformKey    = "EXO0b0b0b0b0b0b0b0b0b0b0b0b"
	terraformSecret = "terraform-key-secret-of-the-test-0123456789"
)

// documentedRole is an IAM role policy of docs/exoscale.md, exactly as an
// admin copies it.
func documentedRole(t *testing.T, heading string) *emuexo.Policy {
	t.Helper()
	p, err := emuexo.ParsePolicy(fixture.DocumentedJSON(t, "../..", "exoscale.md", heading))
	if err != nil {
		t.Fatalf("the role of docs/exoscale.md %q: %v", heading, err)
	}
	return p
}

// stateRemoved are the addresses docs/adopt.md's `terraform state rm`
// steps remove from the state.
func stateRemoved(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/adopt.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cmd := range regexp.MustCompile(`terraform state rm((?:\s+\\?\s*'[^']+')+)`).FindAllStringSubmatch(string(doc), -1) {
		for _, a := range regexp.MustCompile(`'([^']+)'`).FindAllStringSubmatch(cmd[1], -1) {
			out = append(out, a[1])
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/adopt.md has no terraform state rm step")
	}
	return out
}

// tfResource is one resource of the module's state in the emulated world:
// its address (module.cluster as docs/adopt.md assumes) and how to read
// the attributes the module sets.
type tfResource struct {
	address string
	// kept: Terraform keeps writing it after the handover (the module's
	// count stays as it was); false for a group whose count the docs set
	// to 0.
	kept bool
	read func() (map[string]any, error)
}

// keptState is the snapshot of what Terraform keeps.
type keptState struct {
	t      *testing.T
	res    []tfResource
	before []map[string]any
}

// terraformKept checks the docs against the world's resources (every
// resource of a group the docs hand over is removed from the state, none of
// a group Terraform keeps) and snapshots those Terraform keeps.
func terraformKept(t *testing.T, res []tfResource) *keptState {
	t.Helper()
	removed := stateRemoved(t)
	k := &keptState{t: t}
	for _, r := range res {
		rm := slices.ContainsFunc(removed, func(a string) bool { return r.address == a || strings.HasPrefix(r.address, a+"[") })
		switch {
		case r.kept && rm:
			t.Errorf("docs/adopt.md removes %s from the state, which Terraform keeps", r.address)
		case !r.kept && !rm:
			t.Errorf("docs/adopt.md does not remove %s from the state: set to count 0, the module would destroy it", r.address)
		case r.kept:
			attrs, err := r.read()
			if err != nil {
				t.Fatalf("%s: %v", r.address, err)
			}
			k.res, k.before = append(k.res, r), append(k.before, attrs)
		}
	}
	return k
}

// agrees fails for every attribute of a kept resource that is not as the
// module wrote it.
func (k *keptState) agrees(t *testing.T) {
	t.Helper()
	for i, r := range k.res {
		after, err := r.read()
		if err != nil {
			t.Errorf("%s: %v", r.address, err)
			continue
		}
		b, _ := json.Marshal(k.before[i])
		a, _ := json.Marshal(after)
		if string(a) != string(b) {
			t.Errorf("Terraform keeps %s, and the next terraform apply would change it back:\n  the module: %s\n  now:        %s", r.address, b, a)
		}
	}
}

// terraformKept: the cloudscale.ch module's state of the test's cluster.
// The masters (modules/node-group, make_master_adoptable_by_provider) and
// their group stay; the workers and infra nodes are handed over.
func (w *csWorld) terraformKept(t *testing.T, e *env) *keptState {
	server := func(uuid string) func() (map[string]any, error) {
		return func() (map[string]any, error) {
			s, err := w.c.Servers.Get(e.ctx, uuid)
			if err != nil {
				return nil, err
			}
			var groups, ifaces []string
			for _, g := range s.ServerGroups {
				groups = append(groups, g.UUID)
			}
			for _, i := range s.Interfaces {
				for _, a := range i.Addresses {
					ifaces = append(ifaces, i.Type+" "+a.Subnet.UUID)
				}
			}
			return map[string]any{"name": s.Name, "zone_slug": s.Zone.Slug, "flavor_slug": s.Flavor.Slug,
				"server_group_ids": groups, "interfaces": ifaces, "tags": s.Tags}, nil
		}
	}
	group := func(uuid string) func() (map[string]any, error) {
		return func() (map[string]any, error) {
			g, err := w.c.ServerGroups.Get(e.ctx, uuid)
			if err != nil {
				return nil, err
			}
			return map[string]any{"name": g.Name, "type": g.Type, "zone_slug": g.Zone.Slug, "tags": g.Tags}, nil
		}
	}
	network := func() (map[string]any, error) {
		n, err := w.c.Networks.Get(e.ctx, w.network)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": n.Name, "zone_slug": n.Zone.Slug, "tags": n.Tags}, nil
	}
	subnet := func() (map[string]any, error) {
		s, err := w.c.Subnets.Get(e.ctx, w.subnet)
		if err != nil {
			return nil, err
		}
		return map[string]any{"cidr": s.CIDR, "gateway_address": s.GatewayAddress, "tags": s.Tags}, nil
	}
	res := []tfResource{
		{"module.cluster.cloudscale_network.privnet[0]", true, network},
		{"module.cluster.cloudscale_subnet.privnet_subnet[0]", true, subnet},
		{"module.cluster.module.master.cloudscale_server_group.nodes[0]", true, group(w.groups["master"])},
		{"module.cluster.module.worker.cloudscale_server_group.nodes[0]", false, nil},
		{"module.cluster.module.infra.cloudscale_server_group.nodes[0]", false, nil},
	}
	for _, name := range slices.Sorted(maps.Keys(w.servers)) {
		role, _, _ := strings.Cut(name, "-")
		if name == "bootstrap" {
			continue // bootstrap_count = 0 once installed: not in the state
		}
		res = append(res, tfResource{"module.cluster.module." + role + ".cloudscale_server.node[" + name + "]", role == "master", server(w.servers[name].UUID)})
	}
	return terraformKept(t, res)
}

// terraformKept: the Exoscale module's state of the test's cluster. The
// masters, their anti-affinity group, the security groups, the private
// network and the SSH key stay; the infra nodes are handed over; the
// workers' pool goes with adopt (worker_count = 0 right after).
func (w *exoWorld) terraformKept(t *testing.T, e *env) *keptState {
	instance := func(id v3.UUID) func() (map[string]any, error) {
		return func() (map[string]any, error) {
			i, err := w.c.GetInstance(e.ctx, id)
			if err != nil {
				return nil, err
			}
			var sgs, aags, nets []string
			for _, g := range i.SecurityGroups {
				sgs = append(sgs, string(g.ID))
			}
			for _, g := range i.AntiAffinityGroups {
				aags = append(aags, string(g.ID))
			}
			for _, n := range i.PrivateNetworks {
				nets = append(nets, string(n.ID))
			}
			labels := map[string]string(i.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			it := ""
			if i.InstanceType != nil {
				it = string(i.InstanceType.ID)
			}
			return map[string]any{"name": i.Name, "type": it, "disk_size": i.DiskSize, "state": i.State, "security_group_ids": sgs,
				"anti_affinity_group_ids": aags, "network_interface": nets, "labels": labels}, nil
		}
	}
	// An anti-affinity or a security group: the module sets its name and
	// description.
	named := func(get func() (name, description string, err error)) func() (map[string]any, error) {
		return func() (map[string]any, error) {
			name, description, err := get()
			return map[string]any{"name": name, "description": description}, err
		}
	}
	aag := func(id v3.UUID) func() (map[string]any, error) {
		return named(func() (string, string, error) {
			g, err := w.c.GetAntiAffinityGroup(e.ctx, id)
			if err != nil {
				return "", "", err
			}
			return g.Name, g.Description, nil
		})
	}
	sg := func(id v3.UUID) func() (map[string]any, error) {
		return named(func() (string, string, error) {
			g, err := w.c.GetSecurityGroup(e.ctx, id)
			if err != nil {
				return "", "", err
			}
			return g.Name, g.Description, nil
		})
	}
	network := func() (map[string]any, error) {
		n, err := w.c.GetPrivateNetwork(e.ctx, w.network)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": n.Name, "description": n.Description, "labels": n.Labels}, nil
	}
	res := []tfResource{
		{"module.cluster.exoscale_private_network.clusternet[0]", true, network},
		{"module.cluster.module.master.exoscale_anti_affinity_group.anti_affinity_group[0]", true, aag(w.aags["master"])},
		{"module.cluster.module.infra.exoscale_anti_affinity_group.anti_affinity_group[0]", false, nil},
	}
	for _, name := range slices.Sorted(maps.Keys(w.sgs)) {
		res = append(res, tfResource{"module.cluster.exoscale_security_group." + name, true, sg(w.sgs[name])})
	}
	for _, name := range slices.Sorted(maps.Keys(w.instances)) {
		role, _, _ := strings.Cut(name, "-")
		res = append(res, tfResource{"module.cluster.module." + role + ".exoscale_compute_instance.nodes[" + name + "]", role == "master", instance(w.instances[name])})
	}
	return terraformKept(t, res)
}
