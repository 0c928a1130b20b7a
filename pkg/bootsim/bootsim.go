// Package bootsim plays the part of booting servers in the local cluster:
// when an emulated server is running, its Node registers as the kubelet of
// an OpenShift worker would — named by the hostname the server boots with
// (what its user data's Ignition writes to /etc/hostname, else what its
// cloud gives; never looked up from its Machine: hostname.go), with the
// server's capacity — and kwok keeps it Ready. On platform None the Node
// comes with the server's provider ID, addresses and the cloud's labels; on
// platform External it registers as a kubelet started with
// --cloud-provider=external does, and a cloud-controller-manager
// (pkg/localcluster/ccm) has to initialize it (Options.External). When the
// server is gone, its Node stops heartbeating, as a dead kubelet's does, and
// the node controller finds it NotReady.
package bootsim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// Server is what the simulation needs to know of an emulated server to
// register its Node as the kubelet of a booted worker would.
type Server struct {
	// ID is the cloud's ID of the server; ProviderID the Node's
	// spec.providerID for it ("<cloud>://<ID>", as the Machine has it).
	ID, ProviderID string
	// Name is the server's name.
	Name string
	// UserData is the server's user data as the booting OS reads it
	// (decoded from base64 where the API carries it so); its Ignition's
	// /etc/hostname names the Node.
	UserData []byte
	// CloudHostname is the hostname the cloud gives the OS when the user
	// data sets none ("" for none known: DefaultHostname); each cloud's
	// view says what its cloud gives, and why (pkg/demo).
	CloudHostname string
	// Running: booted, its kubelet may start.
	Running bool
	// InstanceType, Zone and Region become the Node's well-known labels.
	InstanceType, Zone, Region string
	// What the instance type and the root disk give the Node.
	CPUs, GPUs  int
	MemoryBytes int64
	DiskGiB     int
	// PrivateIPs and PublicIPs become the Node's addresses.
	PrivateIPs, PublicIPs []string
}

// Cloud is the simulation's view of an emulated cloud: its servers as they
// are now, read in-process (no API call to count). Each emulator has one
// (pkg/demo).
type Cloud interface {
	Servers() []Server
}

// Options configure the simulation.
type Options struct {
	// RegisterDelay is how long after its server runs a Node registers:
	// the OS boot and kubelet start the emulator does not model.
	RegisterDelay time.Duration
	// MaxPods per Node (OpenShift's default is 250).
	MaxPods int
	// Interval between looks at the emulator.
	Interval time.Duration
	// External registers Nodes as a kubelet started with
	// --cloud-provider=external does on Kubernetes 1.29 and later: tainted
	// node.cloudprovider.kubernetes.io/uninitialized (NoSchedule), without
	// addresses (no --node-ip), without the cloud's instance-type, zone and
	// region labels, with the instance's ID as its systemUUID (on Exoscale
	// the CCM's only way to the instance), and without a providerID unless
	// KubeletProviderID. The cloud's CCM sets the rest. Without External
	// (platform None, a MachineConfig giving the kubelet its providerID)
	// the Node has all of it at once.
	External bool
	// KubeletProviderID gives the kubelet of an External Node the server's
	// providerID (--provider-id, as a MachineConfig that sets
	// KUBELET_PROVIDERID does), which the CCM then looks the server up by.
	KubeletProviderID bool
	Log               logr.Logger
}

// UninitializedTaint is the taint a kubelet started with
// --cloud-provider=external registers its Node with, until the CCM has
// initialized it (k8s.io/cloud-provider/api.TaintExternalCloudProvider).
var UninitializedTaint = corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// Simulator registers and abandons Nodes for the servers of an emulator.
type Simulator struct {
	client  client.Client
	cloud   Cloud
	o       Options
	running map[string]time.Time // provider ID -> first seen running
	// registered: the names of the Nodes registered, by the provider ID of
	// their servers. A kubelet registers its Node once, when it starts;
	// after that a deleted Node stays deleted. Without this, a Node the
	// machine controller deletes right after the server could come back
	// from a look at the emulator taken just before, and stay forever.
	registered map[string]string
}

// New returns a simulator; Run starts it.
func New(c client.Client, cloud Cloud, o Options) *Simulator {
	if o.MaxPods == 0 {
		o.MaxPods = 250
	}
	if o.Interval == 0 {
		o.Interval = 500 * time.Millisecond
	}
	return &Simulator{client: c, cloud: cloud, o: o, running: map[string]time.Time{}, registered: map[string]string{}}
}

// Run simulates until ctx ends.
func (s *Simulator) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		if err := s.Step(ctx); err != nil && ctx.Err() == nil {
			s.o.Log.Error(err, "boot simulation step failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Step registers the Nodes of servers that have booted and abandons those
// of servers that are gone.
func (s *Simulator) Step(ctx context.Context) error {
	servers := s.cloud.Servers()
	var nodes corev1.NodeList
	if err := s.client.List(ctx, &nodes); err != nil {
		return err
	}
	// A server whose Node is there already (registered by this simulation
	// before, or made by a test as a node Terraform made, with the server's
	// provider ID or only its address) has its kubelet.
	hasNode := map[string]bool{}
	for _, n := range nodes.Items {
		if n.Spec.ProviderID != "" {
			hasNode[n.Spec.ProviderID] = true
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				hasNode[a.Address] = true
			}
		}
	}
	alive := map[string]bool{}
	for _, srv := range servers {
		alive[srv.ProviderID] = true
		if !srv.Running || hasNode[srv.ProviderID] || slices.ContainsFunc(srv.PrivateIPs, func(ip string) bool { return hasNode[ip] }) {
			continue
		}
		first, seen := s.running[srv.ProviderID]
		if !seen {
			s.running[srv.ProviderID] = time.Now()
			first = time.Now()
		}
		if _, done := s.registered[srv.ProviderID]; done || time.Since(first) < s.o.RegisterDelay {
			continue
		}
		name, err := s.register(ctx, srv)
		if err != nil {
			return err
		}
		s.registered[srv.ProviderID] = name
	}
	// The Nodes whose servers are gone: those that have their provider ID
	// (set by the kubelet or the CCM, or made by a test), and those this
	// simulation registered, which on platform External have none until
	// the CCM initialized them.
	gone := map[string]bool{}
	for id, name := range s.registered {
		if !alive[id] {
			gone[name] = true
		}
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Annotations[localcluster.KwokNodeAnnotation] == "" || !gone[n.Name] && (n.Spec.ProviderID == "" || alive[n.Spec.ProviderID]) {
			continue
		}
		// The server is gone: its kubelet no longer reports.
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+localcluster.KwokNodeAnnotation+`":null}}}`))
		if err := s.client.Patch(ctx, n, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		s.o.Log.Info("server gone, node stops heartbeating", "node", n.Name)
	}
	for id := range s.running {
		if !alive[id] {
			delete(s.running, id)
		}
	}
	for id := range s.registered {
		if !alive[id] {
			delete(s.registered, id)
		}
	}
	return nil
}

// register creates the Node of a running server unless it exists, and
// returns its name: the hostname the server boots with (nodeName).
func (s *Simulator) register(ctx context.Context, srv Server) (string, error) {
	name, from, unread := nodeName(srv)
	if unread {
		s.o.Log.Info("the user data sets the hostname from a source fetched at boot, which the simulation cannot read: the cloud's name", "server", srv.ProviderID, "node", name)
	}
	var existing corev1.Node
	err := s.client.Get(ctx, client.ObjectKey{Name: name}, &existing)
	if err == nil || !apierrors.IsNotFound(err) {
		return name, err
	}
	node := nodeFor(srv, name, s.o.MaxPods)
	if s.o.External {
		external(node, s.o.KubeletProviderID)
	}
	if err := s.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("registering node %s: %w", name, err)
	}
	s.o.Log.Info("server booted, node registered", "node", name, "hostnameFrom", from, "providerID", node.Spec.ProviderID, "server", srv.ProviderID)
	return name, nil
}

// external turns the Node a kubelet registers on platform None into the one
// it registers with --cloud-provider=external: what the CCM would set is not
// there yet, and the Node waits for it, tainted. The kubelet's own labels
// (hostname, os, arch, its --node-labels' role) stay.
//
// The Node registers with the status the kubelet posts (Ready, phase
// Running), so that kwok only keeps it Ready (its lease) and never runs its
// node-initialize stage on it: that stage writes status.addresses from its
// own --node-ip when the Node has no InternalIP, which (kwok having none)
// wipes the addresses the CCM set, as no kubelet started with
// --cloud-provider=external does.
func external(n *corev1.Node, keepProviderID bool) {
	for _, k := range []string{corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, corev1.LabelTopologyRegion} {
		delete(n.Labels, k)
	}
	n.Status.Addresses = nil
	if !keepProviderID {
		n.Spec.ProviderID = ""
	}
	n.Spec.Taints = append(n.Spec.Taints, UninitializedTaint)
	now := metav1.Now()
	n.Status.Phase = corev1.NodeRunning
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
	}
}

func nodeFor(srv Server, name string, maxPods int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(srv.CPUs), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(srv.MemoryBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(srv.DiskGiB)<<30, resource.BinarySI),
	}
	if srv.GPUs > 0 {
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(srv.GPUs), resource.DecimalSI)
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":           name,
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/arch":               "amd64",
				"node.kubernetes.io/instance-type": srv.InstanceType,
				"topology.kubernetes.io/zone":      srv.Zone,
				"topology.kubernetes.io/region":    srv.Region,
				"node-role.kubernetes.io/worker":   "",
			},
			Annotations: map[string]string{localcluster.KwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{ProviderID: srv.ProviderID},
	}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
	for _, ip := range srv.PrivateIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	for _, ip := range srv.PublicIPs {
		if len(srv.PrivateIPs) == 0 {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip})
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.34.4", OperatingSystem: "linux", Architecture: "amd64", OSImage: "Red Hat Enterprise Linux CoreOS (emulated)", MachineID: srv.ID, SystemUUID: srv.ID}
	return n
}
