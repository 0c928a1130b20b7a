package exoscale

import (
	"errors"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// nodeVeto is the veto of a cluster with one Node: without a providerID
// (matched by name and address) when pid is "".
func nodeVeto(name, pid, ip string) nodes.Veto {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	return nodes.Veto{Index: nodes.New(Name, []corev1.Node{n})}
}

// Every delete asks the Node veto with the instance as the cloud shows it
// right before: a Node without a providerID that reports only the
// instance's private address (its managed network's lease, which the
// client of a restarted manager has never read) keeps it. The leases are
// read then only when a Node of the instance's name could match by
// address; a delete costs nothing more otherwise.
func TestDeleteVetoReadsThePrivateAddresses(t *testing.T) {
	x := newEnv(t, emu.Config{})
	x.network("ch-gva-2", "cluster")
	made, _, err := x.c.CreateServer(x.ctx, ref("worker-a"), x.spec(specJSON(map[string]any{"privateNetworks": []any{map[string]string{"name": "cluster"}}})), nil)
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := x.emu.Instance(made.ID)
	if len(inst.PrivateIPs) != 1 {
		t.Fatalf("the instance leases %v", inst.PrivateIPs)
	}
	ip := inst.PrivateIPs[0]
	// A restarted manager's client: it has synced nothing.
	cl, err := x.cloud.NewClient(*x.cloud.DefaultCredentials(), cloud.NewGate(Name, cloud.RateLimit{}))
	if err != nil {
		t.Fatal(err)
	}
	fresh := cl.(*Client)
	listed, err := fresh.ListServers(x.ctx, cloud.Selector{ClusterID: clusterID, Machine: "worker-a"})
	if err != nil || len(listed) != 1 {
		t.Fatalf("list: %v, %v", listed, err)
	}
	if len(listed[0].AddressesUnknown) != 1 {
		t.Errorf("the listed instance: addresses %v, unknown %v; want its private network's unknown", listed[0].Addresses, listed[0].AddressesUnknown)
	}
	h := x.emu.Harness()
	h.ResetRequests()
	err = fresh.DeleteServer(x.ctx, ref("worker-a"), &listed[0], nodeVeto("worker-a", "", ip))
	var vetoed *nodes.VetoedError
	if !errors.As(err, &vetoed) || vetoed.Nodes[0].By != nodes.ByName {
		t.Fatalf("delete of an instance a Node runs on by its private address %s: %v", ip, err)
	}
	if n := h.Count("DELETE /v2/instance/{id}"); n != 0 {
		t.Errorf("%d deletes sent", n)
	}
	if n := h.Count("GET /v2/private-network/{id}"); n != 1 {
		t.Errorf("%d lease reads, want 1: the address is read right before the delete", n)
	}
	// By providerID: no lease to read.
	h.ResetRequests()
	if err := fresh.DeleteServer(x.ctx, ref("worker-a"), &listed[0], nodeVeto("other-name", "exoscale://"+made.ID, "")); !errors.As(err, &vetoed) {
		t.Fatalf("delete of an instance a Node runs on by providerID: %v", err)
	}
	if n := h.Count("GET /v2/private-network/{id}"); n != 0 {
		t.Errorf("%d lease reads for a veto by providerID", n)
	}
	// A Node of another address: the instance goes, with one lease read.
	h.ResetRequests()
	if err := fresh.DeleteServer(x.ctx, ref("worker-a"), &listed[0], nodeVeto("worker-a", "", "172.18.200.249")); err != nil {
		t.Fatalf("delete with a Node of the name on another address: %v", err)
	}
	if n := h.Count("DELETE /v2/instance/{id}"); n != 1 {
		t.Errorf("%d deletes, want 1", n)
	}
	if err := fresh.DeleteServer(x.ctx, ref("worker-a"), &listed[0], nil); !errors.Is(err, cloud.ErrNoVeto) {
		t.Errorf("a delete without a veto: %v", err)
	}
}

// adopt's replacement of an instance pool evicts a member (which destroys
// it) only when no Node runs on it but the one it drained: the veto is
// asked with the member's leases read right before.
func TestEvictionAsksTheVeto(t *testing.T) {
	x := newEnv(t, emu.Config{})
	network := x.network("ch-gva-2", "cluster")
	op := x.wait(x.raw.CreateInstancePool(x.ctx, v3.CreateInstancePoolRequest{Name: "c1_worker-0", Size: 2, InstancePrefix: "worker",
		InstanceType: &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("standard.medium"))}, Template: &v3.Template{ID: "188e6dc9-7b29-4db4-a8af-fc6368660738"},
		DiskSize: 20, PrivateNetworks: []v3.PrivateNetwork{{ID: v3.UUID(network)}}}))
	p, err := x.raw.GetInstancePool(x.ctx, op.Reference.ID)
	if err != nil {
		t.Fatal(err)
	}
	pool := cloud.FoundPool{ID: string(p.ID), Name: p.Name, Zone: "ch-gva-2", Size: 2}
	for _, m := range p.Instances {
		pool.Members = append(pool.Members, string(m.ID))
	}
	member, _ := x.emu.Instance(pool.Members[0])
	h := x.emu.Harness()
	h.ResetRequests()
	err = x.c.EvictPoolMember(x.ctx, pool, member.ID, nodeVeto(member.Name, "", member.PrivateIPs[0]))
	var vetoed *nodes.VetoedError
	if !errors.As(err, &vetoed) || h.Count("PUT /v2/instance-pool/{id}:evict") != 0 {
		t.Fatalf("evicting a member a Node runs on by its private address: %v, %d evictions", err, h.Count("PUT /v2/instance-pool/{id}:evict"))
	}
	drained := nodeVeto(member.Name, "", member.PrivateIPs[0])
	drained.Except = func(m nodes.Match) bool { return m.Node.Name == member.Name }
	if err := x.c.EvictPoolMember(x.ctx, pool, member.ID, drained); err != nil {
		t.Fatalf("evicting the member whose Node adopt drained: %v", err)
	}
	if n := h.Count("PUT /v2/instance-pool/{id}:evict"); n != 1 {
		t.Errorf("%d evictions, want 1", n)
	}
}
