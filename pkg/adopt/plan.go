package adopt

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/gitops"
	"github.com/appuio/machine-api-provider/pkg/nodes"
)

// Labels of the Machine API.
const (
	clusterLabel    = "machine.openshift.io/cluster-api-cluster"
	machineSetLabel = "machine.openshift.io/cluster-api-machineset"
	roleLabel       = "machine.openshift.io/cluster-api-machine-role"
	typeLabel       = "machine.openshift.io/cluster-api-machine-type"
	nodeRolePrefix  = "node-role.kubernetes.io/"
)

// Annotations adopt writes.
const (
	// AdoptedAnnotation on a Machine names the server adopt found for it.
	AdoptedAnnotation = "machine.appuio.io/adopted-server"
	// WrittenAnnotation marks the MachineSets and the
	// ControlPlaneMachineSet adopt wrote: adopt --undo releases them
	// (pkg/uninstall).
	WrittenAnnotation = "machine.appuio.io/written-by-adopt"
	// PoolAnnotation on a MachineSet names the instance pool whose members
	// it replaces, PoolSizeAnnotation how many members the pool had when
	// the replacement began.
	PoolAnnotation     = "machine.appuio.io/replaces-instance-pool"
	PoolSizeAnnotation = "machine.appuio.io/replaces-instance-pool-size"
	// MasterHook is the pre-drain lifecycle hook of adopted masters: a
	// deleted master Machine waits at it, so its server stays until
	// someone removes the hook.
	MasterHook      = "machine-api-provider-adopted-master"
	masterHookOwner = "machine-api-provider adopt"
)

// How a node group is brought under the provider.
const (
	// InPlace: each server gets a Machine and the provider's identity;
	// nothing else changes.
	InPlace = "in place"
	// Replace: the servers are owned by an instance pool, which lets them
	// go only by destroying them; a MachineSet makes one new Machine per
	// member, then the member is drained and evicted.
	Replace = "rolling replacement"
)

// Member actions.
const (
	ActAdopt   = "adopt"
	ActAdopted = "adopted already"
	ActMisfit  = "left alone"
	ActReplace = "replace"
)

// Plan is what adopt would do, and with --apply does.
type Plan struct {
	Cloud     string
	ClusterID string
	// TakeOverClusterID is the other cluster ID whose servers it takes
	// over (Options.TakeOverClusterID), "" for none.
	TakeOverClusterID string
	// LegacyClusterIDs are the legacy IDs the cluster declares
	// (Options.LegacyClusterIDs).
	LegacyClusterIDs []string
	Groups           []*Group
	// Unmatched are servers of the cluster's domain that no Node runs on.
	Unmatched []cloud.Found
	// GitOps are the objects adopt works beside that Argo CD or Flux
	// keeps in sync (gitops.go); GitOpsUnread says what of Argo CD could
	// not be read.
	GitOps       []gitops.Finding
	GitOpsUnread string
	// servers are every server the survey found; surveyed says there was
	// one (a Plan made by Plan).
	servers  []cloud.Found
	surveyed bool
}

// Group is one node group: the servers of one role in one zone (or one
// instance pool), and the MachineSet (or, for masters, the
// ControlPlaneMachineSet) that describes them.
type Group struct {
	// Name is the MachineSet's name, or "control plane" for masters.
	Name string
	// ClusterID is the cluster ID its Machines and MachineSet carry, and
	// its servers are tagged with: the cluster's infrastructureName, or a
	// legacy ID the cluster declares that its servers carry already
	// (clusterOfGroup).
	ClusterID string
	Role      string
	Zone      string
	Master    bool
	Mode      string
	Pool      *cloud.FoundPool
	// Spec is the provider spec a Machine of the group has, as the
	// webhooks and the actuator default it; SpecJSON its JSON with
	// sorted members, which every Machine and template of the group
	// carries byte for byte.
	Spec     cloud.Spec
	SpecJSON []byte
	// SpecError says why the group has no spec (its members do not parse).
	SpecError string
	// AntiAffinityKey is the spec's key; TakeOver the existing groups that
	// become the key's; GroupNote says what happens to the others.
	AntiAffinityKey string
	TakeOver        []cloud.FoundGroup
	GroupNote       string
	maxGroup        int
	// noTakeover: the cloud cannot take the members' groups over.
	noTakeover bool
	UserData   UserData
	// NodeLabels are the node-role labels every Node of the group has:
	// the Machines' spec.metadata.labels.
	NodeLabels map[string]string
	Members    []*Member
	// MachineSet and CPMS are the objects adopt writes (nil when it writes
	// none); Exists says one is there already.
	MachineSet *machinev1beta1.MachineSet
	CPMS       *machinev1.ControlPlaneMachineSet
	Exists     bool
	// Blocked says why the group is left alone as a whole.
	Blocked string
	// CPMSNote says why the masters get no ControlPlaneMachineSet.
	CPMSNote string
	// Warnings are what an admin must know before applying: storage nodes
	// (storage.go), operations the credentials were refused.
	Warnings []string
}

// Member is one server of a group.
type Member struct {
	Found *cloud.Found
	Node  *corev1.Node
	// Existing is the Machine that records the server already, if any.
	Existing    *machinev1beta1.Machine
	MachineName string
	Action      string
	// Misfits are the fields in which the server differs from the group,
	// with its own value.
	Misfits []string
	// Machine is the Machine adopt writes for it (nil when none).
	Machine *machinev1beta1.Machine
	// Restore: adopted already, but the server no longer carries its
	// Machine's identity (none, or the ID adopt takes over): adopt gives
	// it back: the identity of restoreID, its Machine's cluster label.
	Restore   bool
	restoreID string
}

// cluster is what the cluster says about its nodes and Machines.
type cluster struct {
	nodes       []corev1.Node
	machines    []machinev1beta1.Machine
	machineSets []machinev1beta1.MachineSet
	cpms        []machinev1.ControlPlaneMachineSet
}

func (a *Adopter) readCluster(ctx context.Context) (*cluster, error) {
	c := &cluster{}
	var nodes corev1.NodeList
	if err := a.kube.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	var machines machinev1beta1.MachineList
	if err := a.kube.List(ctx, &machines, client.InNamespace(a.o.Namespace)); err != nil {
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	var sets machinev1beta1.MachineSetList
	if err := a.kube.List(ctx, &sets, client.InNamespace(a.o.Namespace)); err != nil {
		return nil, fmt.Errorf("listing MachineSets: %w", err)
	}
	var cpms machinev1.ControlPlaneMachineSetList
	if err := a.kube.List(ctx, &cpms, client.InNamespace(a.o.Namespace)); err != nil && !isNoKind(err) {
		return nil, fmt.Errorf("listing ControlPlaneMachineSets: %w", err)
	}
	c.nodes, c.machines, c.machineSets, c.cpms = nodes.Items, machines.Items, sets.Items, cpms.Items
	return c, nil
}

// Plan surveys the cloud and the cluster and says what adopt would do. It
// changes nothing.
func (a *Adopter) Plan(ctx context.Context) (*Plan, error) {
	found, err := a.a.Survey(ctx, a.o.Zones)
	if err != nil {
		return nil, fmt.Errorf("surveying the %s account: %w", a.cloud.Name(), err)
	}
	cl, err := a.readCluster(ctx)
	if err != nil {
		return nil, err
	}
	p := &Plan{Cloud: a.cloud.Name(), ClusterID: a.o.ClusterID, TakeOverClusterID: a.o.TakeOverClusterID, LegacyClusterIDs: a.ids().Legacy,
		servers: found, surveyed: true}
	matched, unmatched := a.match(found, cl.nodes)
	for _, m := range matched {
		pid := a.cloud.Name() + "://" + m.Found.ID
		for i := range cl.machines {
			if p := cl.machines[i].Spec.ProviderID; p != nil && *p == pid {
				m.Existing = &cl.machines[i]
			}
		}
	}
	groups := map[string]*Group{}
	var order []string
	for _, m := range matched {
		key, g := a.groupOf(m)
		if existing, ok := groups[key]; ok {
			g = existing
		} else {
			groups[key] = g
			order = append(order, key)
		}
		g.Members = append(g.Members, m)
	}
	domains := map[string]bool{}
	for _, m := range matched {
		if _, d, ok := strings.Cut(m.Found.Name, "."); ok {
			domains[d] = true
		}
	}
	for _, f := range unmatched {
		if _, d, ok := strings.Cut(f.Name, "."); ok && domains[d] {
			p.Unmatched = append(p.Unmatched, f)
		}
	}
	sort.Strings(order)
	// Masters first, then the groups by name: the plan reads the same
	// every time.
	slices.SortStableFunc(order, func(x, y string) int {
		return boolInt(!groups[x].Master) - boolInt(!groups[y].Master)
	})
	names := map[string]int{}
	for _, k := range order {
		names[groups[k].Name]++
	}
	for _, k := range order {
		g := groups[k]
		if g.Pool != nil && names[g.Name] > 1 && !replacesPool(existingMachineSet(cl, g.Name), g.Pool.ID) {
			// Another group of the role and zone has the name; but the
			// Machines a replacement begun before has made are of this
			// pool's own MachineSet: it goes on with that one.
			g.Name += "-pool"
		}
		if err := a.planGroup(ctx, g, cl); err != nil {
			return nil, err
		}
		p.Groups = append(p.Groups, g)
	}
	if err := a.gitOps(ctx, p, cl); err != nil {
		return nil, err
	}
	return p, nil
}

// replacesPool says whether a MachineSet is the one replacing the pool's
// members (PoolAnnotation).
func replacesPool(ms *machinev1beta1.MachineSet, poolID string) bool {
	return ms != nil && ms.Annotations[PoolAnnotation] == poolID
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// match pairs servers with Nodes as every part of the provider does
// (pkg/nodes): by provider ID, else by the name (the name's first label, as
// the Terraform modules' Ignition sets the hostname, or the whole name)
// when an address agrees too: a name alone could be another cluster's
// node of the same name.
func (a *Adopter) match(found []cloud.Found, list []corev1.Node) ([]*Member, []cloud.Found) {
	ix := nodes.New(a.cloud.Name(), list)
	var matched []*Member
	var unmatched []cloud.Found
	for i := range found {
		f := &found[i]
		on := ix.On(f.Server)
		if len(on) == 0 {
			unmatched = append(unmatched, *f)
			continue
		}
		host, _, _ := strings.Cut(f.Name, ".")
		matched = append(matched, &Member{Found: f, Node: on[0].Node, MachineName: host})
	}
	return matched, unmatched
}

// terraformName is the module's node name: <role>-<4 hex> (random_id of 2
// bytes with the role as its prefix).
var terraformName = regexp.MustCompile(`^(.+)-[0-9a-f]{4}$`)

// roleOf names a server's role: master for the control plane; else the
// role the Terraform module put in its name or its pool's name; else the
// Node's role that is not "worker".
func roleOf(m *Member, clusterIDs ...string) string {
	if isMaster(m.Node) {
		return "master"
	}
	if p := m.Found.Pool; p != nil {
		// <cluster>_<role>-<n>, the cluster the module's (the one adopt
		// takes over, a legacy one, the cluster's own, or any: the
		// module's cluster_id, which names its resources, need not be
		// one the cluster owns)
		for _, id := range append(clusterIDs, "") {
			name, ok := strings.CutPrefix(p.Name, id+"_")
			if id == "" {
				name, ok = p.Name, true
				if i := strings.LastIndexByte(name, '_'); i >= 0 {
					name = name[i+1:]
				}
			}
			if !ok {
				continue
			}
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				name = name[:i]
			}
			if dnsLabel.MatchString(name) {
				return name
			}
		}
	}
	if m.Existing != nil && dnsLabel.MatchString(m.Existing.Labels[roleLabel]) {
		return m.Existing.Labels[roleLabel]
	}
	for _, id := range clusterIDs {
		if r := machineSetRole(m.MachineName, id, zoneSuffix(m.Found.Zone)); r != "" {
			return r
		}
	}
	if sub := terraformName.FindStringSubmatch(m.MachineName); sub != nil {
		return sub[1]
	}
	for _, k := range slices.Sorted(maps.Keys(m.Node.Labels)) {
		if r, ok := strings.CutPrefix(k, nodeRolePrefix); ok && r != "worker" && dnsLabel.MatchString(r) {
			return r
		}
	}
	return "worker"
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func isMaster(n *corev1.Node) bool {
	_, master := n.Labels[nodeRolePrefix+"master"]
	_, cp := n.Labels[nodeRolePrefix+"control-plane"]
	return master || cp
}

// groupOf is the key and a new group for a member.
func (a *Adopter) groupOf(m *Member) (string, *Group) {
	ids := a.ids().All()
	if a.o.TakeOverClusterID != "" {
		ids = append(ids, a.o.TakeOverClusterID)
	}
	role := roleOf(m, ids...)
	zone := m.Found.Zone
	g := &Group{Role: role, Zone: zone, Mode: InPlace}
	switch {
	case role == "master":
		g.Master, g.Name = true, "control plane"
		return "master", g
	case m.Existing != nil && m.Existing.Labels[machineSetLabel] != "":
		// Adopted before, or made by a MachineSet since: its group is
		// that MachineSet's.
		g.Name = m.Existing.Labels[machineSetLabel]
		return "machineset/" + g.Name, g
	case m.Found.Pool != nil:
		g.Pool, g.Mode = m.Found.Pool, Replace
		g.Name = fmt.Sprintf("%s-%s-%s", a.o.ClusterID, role, zoneSuffix(zone))
		return "pool/" + m.Found.Pool.ID, g
	}
	g.Name = fmt.Sprintf("%s-%s-%s", a.o.ClusterID, role, zoneSuffix(zone))
	return "machineset/" + g.Name, g
}

// zoneSuffix shortens a zone for names, as installers name MachineSets
// after their zone: rma1, gva2 (ch-gva-2).
func zoneSuffix(zone string) string {
	parts := strings.Split(zone, "-")
	if len(parts) == 3 {
		return parts[1] + parts[2]
	}
	return zone
}

// isNoKind says the API server does not know a kind (a cluster without the
// ControlPlaneMachineSet CRD).
func isNoKind(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}
