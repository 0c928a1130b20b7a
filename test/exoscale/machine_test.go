package exoscale

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// sdk is the official SDK on the emulator, to arrange and look at the cloud
// as a user would.
func sdk(e *fixture.Env, zone string) *v3.Client {
	ep := e.APIURL + "v2"
	if zone != "ch-gva-2" {
		ep = e.APIURL + zone + "/v2"
	}
	c, _ := v3.NewClient(credentials.NewStaticCredentials(canaryKey, canarySecret), v3.ClientOptWithEndpoint(v3.Endpoint(ep)))
	return c
}

// done waits for an operation of c to succeed: done(t, c)(c.Create...(...)).
func done(t *testing.T, c *v3.Client) func(*v3.Operation, error) *v3.Operation {
	return func(op *v3.Operation, err error) *v3.Operation {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		op, err = c.Wait(context.Background(), op, v3.OperationStateSuccess)
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
}

// TestMachineBecomesInstance: a Machine of an OpenShift worker on Exoscale
// (RHCOS private template, security group, private network, anti-affinity)
// gets its instance, with everything the spec says, and the Machine gets
// the instance's providerID, addresses and labels.
func TestMachineBecomesInstance(t *testing.T) {
	e := env(t, emu.Config{})
	ctx := context.Background()
	c := sdk(e, "ch-gva-2")
	net := done(t, c)(c.CreatePrivateNetwork(ctx, v3.CreatePrivateNetworkRequest{
		Name: "c1_clusternet", StartIP: []byte{172, 18, 200, 101}, EndIP: []byte{172, 18, 200, 253}, Netmask: []byte{255, 255, 255, 0},
	}))
	sg := done(t, c)(c.CreateSecurityGroup(ctx, v3.CreateSecurityGroupRequest{Name: "c1_all_machines"}))
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(func(s map[string]any) {
		s["securityGroups"] = []any{map[string]string{"name": "c1_all_machines"}}
		s["privateNetworks"] = []any{map[string]string{"name": "c1_clusternet"}}
		s["antiAffinityKey"] = "worker"
	}))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)

	insts := instancesOf(e, "worker-a")
	if len(insts) != 1 {
		t.Fatalf("want exactly one instance, got %d", len(insts))
	}
	i := insts[0]
	if i.Name != "worker-a" || i.InstanceType != "standard.large" || i.TemplateName != "rhcos-4.19" || i.DiskSizeGiB != 120 || i.Zone != "ch-gva-2" {
		t.Errorf("instance %+v", i)
	}
	for k, v := range map[string]string{"team": "platform", v1beta1.LabelMachineName: "worker-a", v1beta1.LabelClusterID: fixture.ClusterID} {
		if i.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, i.Labels[k], v)
		}
	}
	// The secret's Ignition, with the Machine's name as its hostname
	// (pkg/userdata's hostname.go).
	want := strings.TrimSuffix(canaryUserData, "}") + `,"storage":{"files":[{"contents":{"source":"data:,worker-a"},"mode":420,"overwrite":true,"path":"/etc/hostname"}]}}`
	if ud, _ := base64.StdEncoding.DecodeString(i.UserData); string(ud) != want {
		t.Errorf("user data %q, want the secret's Ignition with its Machine's hostname %q", ud, want)
	}
	if len(i.SecurityGroups) != 1 || i.SecurityGroups[0] != string(sg.Reference.ID) {
		t.Errorf("security groups %v", i.SecurityGroups)
	}
	if len(i.PrivateNetworks) != 1 || i.PrivateNetworks[0] != string(net.Reference.ID) || len(i.PrivateIPs) != 1 {
		t.Errorf("private networks %v, addresses %v", i.PrivateNetworks, i.PrivateIPs)
	}
	if len(i.AntiAffinityGroups) != 1 {
		t.Errorf("anti-affinity groups %v", i.AntiAffinityGroups)
	}

	if m.Spec.ProviderID == nil || *m.Spec.ProviderID != "exoscale://"+i.ID {
		t.Errorf("providerID %v, want exoscale://%s", m.Spec.ProviderID, i.ID)
	}
	fixture.Eventually(t, 30*time.Second, "the private address on the Machine", func() (bool, error) {
		m = getMachine(t, e, "worker-a")
		for _, a := range m.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && len(i.PrivateIPs) == 1 && a.Address == i.PrivateIPs[0] {
				return true, nil
			}
		}
		return false, nil
	})
	addr := map[corev1.NodeAddressType]string{}
	for _, a := range m.Status.Addresses {
		if _, seen := addr[a.Type]; !seen {
			addr[a.Type] = a.Address
		}
	}
	if addr[corev1.NodeExternalIP] != i.PublicIPv4 || addr[corev1.NodeHostName] != "worker-a" {
		t.Errorf("addresses %v, want ExternalIP %s", m.Status.Addresses, i.PublicIPv4)
	}
	for k, v := range map[string]string{"machine.openshift.io/instance-type": "standard.large", "machine.openshift.io/region": "ch-gva-2", "machine.openshift.io/zone": "ch-gva-2"} {
		if m.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, m.Labels[k], v)
		}
	}
	var st v1beta1.ExoscaleMachineProviderStatus
	if err := json.Unmarshal(m.Status.ProviderStatus.Raw, &st); err != nil || st.InstanceID != i.ID {
		t.Errorf("providerStatus %s (%v)", m.Status.ProviderStatus.Raw, err)
	}
	if n := e.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d instance creates, want 1", n)
	}
	// The labels follow the spec.
	m.Spec.ProviderSpec.Value.Raw = []byte(spec(func(s map[string]any) {
		s["securityGroups"] = []any{map[string]string{"name": "c1_all_machines"}}
		s["privateNetworks"] = []any{map[string]string{"name": "c1_clusternet"}}
		s["antiAffinityKey"] = "worker"
		s["labels"] = map[string]string{"team": "storage"}
	}))
	if err := e.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 30*time.Second, "the labels to follow the spec", func() (bool, error) {
		got, _ := e.Exoscale.Instance(i.ID)
		return got.Labels["team"] == "storage", nil
	})
	assertNoCanary(t, e)
}

// TestDeleteAlsoOutOfBand: Machines go with their instances, also when the
// instance was deleted behind the provider's back, and the anti-affinity
// group goes with its last instance.
func TestDeleteAlsoOutOfBand(t *testing.T) {
	e := env(t, emu.Config{})
	startManager(t, e, manager.Options{})
	withKey := spec(func(s map[string]any) { s["antiAffinityKey"] = "worker" })
	createMachine(t, e, "worker-a", withKey)
	createMachine(t, e, "worker-b", withKey)
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	b := waitPhase(t, e, "worker-b", machinev1.PhaseProvisioned)
	id := strings.TrimPrefix(*b.Spec.ProviderID, "exoscale://")
	c := sdk(e, "ch-gva-2")
	done(t, c)(c.DeleteInstance(context.Background(), v3.UUID(id)))

	for _, name := range []string{"worker-a", "worker-b"} {
		e.DeleteMachine(t, name)
	}
	for _, name := range []string{"worker-a", "worker-b"} {
		e.WaitMachineGone(t, name, 60*time.Second)
	}
	if n := e.Exoscale.CountInstances(); n != 0 {
		t.Errorf("%d instances left", n)
	}
	fixture.Eventually(t, 30*time.Second, "the empty group gone", func() (bool, error) {
		return len(e.Exoscale.AntiAffinityGroups()) == 0, nil
	})
	e.AwaitEvent(t, "worker-a", "Normal Deleted")
}

// TestLostResponseMakesOneInstance: the create's answer is lost after the
// instance was made; the SDK's own retries are off, and the provider finds
// the instance instead of making a second.
func TestLostResponseMakesOneInstance(t *testing.T) {
	e := env(t, emu.Config{Faults: []harness.Rule{{Route: createPOST, LostResponseRate: 1, Times: 1}}})
	startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	if n := e.Exoscale.CountInstances(); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
	if n := e.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	assertNoCanary(t, e)
}

// TestRestartMidCreateMakesOneInstance: the manager stops while a slow
// create is in flight (which the cloud completes), and its successor finds
// the instance rather than making another.
func TestRestartMidCreateMakesOneInstance(t *testing.T) {
	const slow = 3 * time.Second
	e := env(t, emu.Config{Faults: []harness.Rule{{Route: createPOST, Latency: harness.Duration(slow), Committed: true, Times: 1}}})
	stop := startManager(t, e, manager.Options{})
	createMachine(t, e, "worker-a", spec(nil))
	fixture.Eventually(t, 30*time.Second, "the create to be sent", func() (bool, error) {
		return e.Harness().Count(createPOST) >= 1, nil
	})
	stop()
	fixture.Eventually(t, 30*time.Second, "the slow create to complete", func() (bool, error) {
		return e.Exoscale.CountInstances() == 1, nil
	})
	startManager(t, e, manager.Options{})
	waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	time.Sleep(2 * time.Second)
	if n := e.Exoscale.CountInstances(); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
	if n := e.Harness().Count(createPOST); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

// TestSeventeenMachinesThreeGroups: one antiAffinityKey, 17 Machines: three
// groups of the provider, none over Exoscale's eight.
func TestSeventeenMachinesThreeGroups(t *testing.T) {
	e := env(t, emu.Config{Accounts: []emu.Account{{Name: "openshift", Key: canaryKey, Secret: canarySecret, Quotas: map[string]int64{"instance": 50}}}})
	startManager(t, e, manager.Options{})
	names := make([]string, 17)
	for i := range names {
		names[i] = "worker-" + string(rune('a'+i))
		createMachine(t, e, names[i], spec(func(s map[string]any) { s["antiAffinityKey"] = "worker" }))
	}
	for _, n := range names {
		waitPhase(t, e, n, machinev1.PhaseProvisioned)
	}
	groups := e.Exoscale.AntiAffinityGroups()
	if len(groups) != 3 {
		t.Errorf("%d groups, want 3: %+v", len(groups), groups)
	}
	total := 0
	for _, g := range groups {
		if len(g.Members) > 8 {
			t.Errorf("group %s holds %d instances", g.Name, len(g.Members))
		}
		if !strings.HasPrefix(g.Name, fixture.ClusterID+"-worker-") {
			t.Errorf("group name %s", g.Name)
		}
		total += len(g.Members)
	}
	if total != 17 || e.Exoscale.CountInstances() != 17 {
		t.Errorf("%d grouped of %d instances", total, e.Exoscale.CountInstances())
	}
}

// TestCapacity: the capacity publisher annotates MachineSets with what an
// instance type offers, from the instance-type API, for a standard and a
// GPU type, with the upstream and the OpenShift keys; and the labels as the
// Exoscale CCM will set them on the Node: the instance type as family.size
// also when the spec names it by ID, the zone as the region, and no zone
// label, which that CCM never sets.
func TestCapacity(t *testing.T) {
	e := env(t, emu.Config{})
	startManager(t, e, manager.Options{CapacityPublisher: true})
	ctx := context.Background()
	byID := emu.InstanceTypeID("standard.large")
	if byID == "" {
		t.Fatal("the emulator has no standard.large")
	}
	for name, s := range map[string]string{
		"c1-worker":     spec(nil),
		"c1-gpu-worker": spec(func(s map[string]any) { s["zone"] = "de-fra-1"; s["instanceType"] = "gpu3.medium"; s["diskSize"] = 400 }),
		"c1-by-id":      spec(func(s map[string]any) { s["instanceType"] = byID }),
	} {
		ms := &machinev1.MachineSet{}
		ms.Name, ms.Namespace = name, fixture.Namespace
		ms.Labels = map[string]string{"machine.openshift.io/cluster-api-cluster": fixture.ClusterID}
		ms.Spec.Selector.MatchLabels = map[string]string{"machine.openshift.io/cluster-api-machineset": name}
		ms.Spec.Template.Labels = map[string]string{"machine.openshift.io/cluster-api-machineset": name, "machine.openshift.io/cluster-api-cluster": fixture.ClusterID}
		ms.Spec.Template.Spec.ProviderSpec = fixture.Machine(name, s).Spec.ProviderSpec
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]map[string]string{
		"c1-worker": {
			"capacity.cluster-autoscaler.kubernetes.io/cpu": "4", "capacity.cluster-autoscaler.kubernetes.io/memory": "8192Mi",
			"capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk": "120Gi",
			"machine.openshift.io/vCPU":                                "4", "machine.openshift.io/memoryMb": "8192", "machine.openshift.io/GPU": "0",
		},
		"c1-gpu-worker": {
			"capacity.cluster-autoscaler.kubernetes.io/cpu": "24", "capacity.cluster-autoscaler.kubernetes.io/memory": "122880Mi",
			"capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk": "400Gi",
			"capacity.cluster-autoscaler.kubernetes.io/gpu-count":      "2", "capacity.cluster-autoscaler.kubernetes.io/gpu-type": "nvidia.com/gpu",
			"machine.appuio.io/gpu-model": "NVIDIA A40",
			"machine.openshift.io/vCPU":   "24", "machine.openshift.io/memoryMb": "122880", "machine.openshift.io/GPU": "2",
		},
		"c1-by-id": {"capacity.cluster-autoscaler.kubernetes.io/cpu": "4", "capacity.cluster-autoscaler.kubernetes.io/memory": "8192Mi"},
	}
	wantLabels := map[string]string{
		"c1-worker":     "kubernetes.io/arch=amd64,node.kubernetes.io/instance-type=standard.large,topology.kubernetes.io/region=ch-gva-2",
		"c1-gpu-worker": "kubernetes.io/arch=amd64,node.kubernetes.io/instance-type=gpu3.medium,topology.kubernetes.io/region=de-fra-1",
		"c1-by-id":      "kubernetes.io/arch=amd64,node.kubernetes.io/instance-type=standard.large,topology.kubernetes.io/region=ch-gva-2",
	}
	for name, annotations := range want {
		fixture.Eventually(t, 60*time.Second, "the capacity of "+name, func() (bool, error) {
			ms := &machinev1.MachineSet{}
			if err := e.Client.Get(ctx, types.NamespacedName{Namespace: fixture.Namespace, Name: name}, ms); err != nil {
				return false, err
			}
			for k, v := range annotations {
				if ms.Annotations[k] != v {
					return false, fmt.Errorf("%s = %q, want %q (annotations %v)", k, ms.Annotations[k], v, ms.Annotations)
				}
			}
			if labels := ms.Annotations["capacity.cluster-autoscaler.kubernetes.io/labels"]; labels != wantLabels[name] {
				return false, fmt.Errorf("labels %q, want %q", labels, wantLabels[name])
			}
			return true, nil
		})
	}
	if n := writes(e); n != 0 {
		t.Errorf("publishing capacity wrote to the cloud: %v", e.Harness().Requests())
	}
	assertNoCanary(t, e)
}

// TestDuplicateInstances: instances carrying a Machine's labels beside its
// own (an operator's mistake) go through the shared duplicate handling: one
// a Node runs on is kept and reported, one without a Node is deleted.
func TestDuplicateInstances(t *testing.T) {
	e := env(t, emu.Config{})
	startManager(t, e, manager.Options{SyncPeriod: 2 * time.Second, ServerViewRefresh: time.Second})
	ctx := context.Background()
	createMachine(t, e, "worker-a", spec(nil))
	m := waitPhase(t, e, "worker-a", machinev1.PhaseProvisioned)
	own := strings.TrimPrefix(*m.Spec.ProviderID, "exoscale://")

	c := sdk(e, "ch-gva-2")
	tpl := e.Exoscale.TemplateID("openshift", "ch-gva-2", "rhcos-4.19")
	dup := func(name string) string {
		op := done(t, c)(c.CreateInstance(ctx, v3.CreateInstanceRequest{
			Name: name, DiskSize: 20, InstanceType: &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("standard.small"))},
			Template: &v3.Template{ID: v3.UUID(tpl)},
			Labels:   v3.Labels{v1beta1.LabelClusterID: fixture.ClusterID, v1beta1.LabelMachineName: "worker-a"},
		}))
		return string(op.Reference.ID)
	}
	withNode := dup("worker-a-copy")
	node := &corev1.Node{}
	node.Name = "worker-a-copy"
	node.Spec.ProviderID = "exoscale://" + withNode
	if err := e.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "the duplicate with a Node reported", func() (bool, error) {
		return strings.Contains(fixture.EventText(e.Events(t, "worker-a")), "Warning DuplicateServer: "), nil
	})
	orphan := dup("worker-a-stray")
	fixture.Eventually(t, 60*time.Second, "the duplicate without a Node deleted", func() (bool, error) {
		_, there := e.Exoscale.Instance(orphan)
		return !there, nil
	})
	for _, id := range []string{own, withNode} {
		if _, there := e.Exoscale.Instance(id); !there {
			t.Errorf("instance %s was deleted", id)
		}
	}
	if m := getMachine(t, e, "worker-a"); *m.Spec.ProviderID != "exoscale://"+own {
		t.Errorf("the Machine moved to %s", *m.Spec.ProviderID)
	}
	e.AwaitEvent(t, "worker-a", "DuplicateServerDeleted")
}
