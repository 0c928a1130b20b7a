package adopt

import (
	"fmt"
	"maps"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// planObjects builds the Machines, the MachineSet or the
// ControlPlaneMachineSet adopt writes for a group.
func (a *Adopter) planObjects(g *Group, cl *cluster) error {
	if g.SpecJSON == nil {
		return nil
	}
	if !g.Master && existingMachineSet(cl, g.Name) != nil {
		// A MachineSet that runs already would count a new Machine of its
		// selector as one too many and delete one: the Machines adopt adds
		// now join no MachineSet.
		g.Exists = true
	}
	for _, m := range g.Members {
		if m.Action == ActAdopt {
			m.Machine = a.machine(g, m)
		}
	}
	if g.Master {
		return a.planCPMS(g, cl)
	}
	if g.Exists {
		return nil
	}
	if g.Blocked != "" {
		return nil
	}
	g.MachineSet = a.machineSet(g, cl)
	return nil
}

// machineLabels are the labels of a group's Machines.
func (a *Adopter) machineLabels(g *Group) map[string]string {
	l := map[string]string{clusterLabel: a.groupID(g), roleLabel: g.Role, typeLabel: g.Role}
	if !g.Master && !g.Exists {
		l[machineSetLabel] = g.Name
	}
	return l
}

func (a *Adopter) providerSpec(g *Group) machinev1beta1.ProviderSpec {
	return machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: append([]byte(nil), g.SpecJSON...)}}
}

// machine is the Machine of a server: it records the server (spec.providerID),
// so that the machine controller never creates one for it.
func (a *Adopter) machine(g *Group, m *Member) *machinev1beta1.Machine {
	pid := a.cloud.Name() + "://" + m.Found.ID
	mach := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.MachineName, Namespace: a.o.Namespace,
			Labels:      a.machineLabels(g),
			Annotations: map[string]string{AdoptedAnnotation: m.Found.Name},
		},
		Spec: machinev1beta1.MachineSpec{
			ObjectMeta:   machinev1beta1.ObjectMeta{Labels: maps.Clone(g.NodeLabels)},
			ProviderID:   &pid,
			ProviderSpec: a.providerSpec(g),
		},
	}
	if g.Master {
		mach.Spec.LifecycleHooks.PreDrain = []machinev1beta1.LifecycleHook{{Name: MasterHook, Owner: masterHookOwner}}
	}
	return mach
}

// machineSet is the group's MachineSet, at as many replicas as there will
// be Machines of its selector. It is written after its Machines run, and
// takes them over by its selector: every Machine of the selector, not only
// those of the servers this run matched to a Node. A Machine an earlier,
// interrupted run made (its server since without a Node adopt matches, or
// in another group now) counts: a MachineSet of fewer replicas than it
// takes over would delete one, maybe a healthy adopted node.
func (a *Adopter) machineSet(g *Group, cl *cluster) *machinev1beta1.MachineSet {
	selector := map[string]string{clusterLabel: a.groupID(g), machineSetLabel: g.Name}
	n := int32(0)
	counted := map[string]bool{}
	for _, m := range cl.machines {
		if m.DeletionTimestamp == nil && labelsMatch(m.Labels, selector) {
			counted[m.Name] = true
			n++
		}
	}
	if g.Mode == InPlace {
		for _, m := range g.Members {
			if m.Action == ActAdopt && !counted[m.MachineName] {
				n++
			}
		}
	}
	ms := &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: a.o.Namespace, Labels: map[string]string{clusterLabel: a.groupID(g)}},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: &n,
			Selector: metav1.LabelSelector{MatchLabels: selector},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: a.machineLabels(g)},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta:   machinev1beta1.ObjectMeta{Labels: maps.Clone(g.NodeLabels)},
					ProviderSpec: a.providerSpec(g),
				},
			},
		},
	}
	ms.Annotations = map[string]string{WrittenAnnotation: "true"}
	if g.Pool != nil {
		ms.Annotations[PoolAnnotation], ms.Annotations[PoolSizeAnnotation] = g.Pool.ID, fmt.Sprint(len(g.Pool.Members))
	}
	return ms
}

// labelsMatch says whether labels hold every pair of selector.
func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// planCPMS describes the masters in an Inactive ControlPlaneMachineSet,
// when they all have the group's spec: its template must be each master's
// spec byte for byte, or activating it would replace them.
func (a *Adopter) planCPMS(g *Group, cl *cluster) error {
	if len(cl.cpms) > 0 {
		g.Exists = true
		return nil
	}
	if g.Blocked != "" {
		// Why is the line above it: the plan prints the reason once.
		g.CPMSNote = "no ControlPlaneMachineSet: the masters are left alone"
		return nil
	}
	for _, m := range g.Members {
		if m.Action == ActMisfit {
			g.CPMSNote = fmt.Sprintf("no ControlPlaneMachineSet: master %s does not have the masters' spec", m.Found.Name)
			return nil
		}
	}
	if n := len(g.Members); n != 3 && n != 5 {
		g.CPMSNote = fmt.Sprintf("no ControlPlaneMachineSet: it takes 3 or 5 masters, there are %d", n)
		return nil
	}
	labels := map[string]string{clusterLabel: a.groupID(g), roleLabel: "master", typeLabel: "master"}
	g.CPMS = &machinev1.ControlPlaneMachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", Namespace: a.o.Namespace, Annotations: map[string]string{WrittenAnnotation: "true"}},
		Spec: machinev1.ControlPlaneMachineSetSpec{
			State:    machinev1.ControlPlaneMachineSetStateInactive,
			Replicas: ptr.To(int32(len(g.Members))),
			Strategy: machinev1.ControlPlaneMachineSetStrategy{Type: machinev1.RollingUpdate},
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.ControlPlaneMachineSetTemplate{
				MachineType: machinev1.OpenShiftMachineV1Beta1MachineType,
				OpenShiftMachineV1Beta1Machine: &machinev1.OpenShiftMachineV1Beta1MachineTemplate{
					ObjectMeta: machinev1.ControlPlaneMachineSetTemplateObjectMeta{Labels: maps.Clone(labels)},
					Spec: machinev1beta1.MachineSpec{
						ObjectMeta:   machinev1beta1.ObjectMeta{Labels: maps.Clone(g.NodeLabels)},
						ProviderSpec: a.providerSpec(g),
					},
				},
			},
		},
	}
	return nil
}
