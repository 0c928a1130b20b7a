package actuator

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/metrics"
)

// Labels and annotations the rest of OpenShift reads off a Machine.
const (
	InstanceTypeLabel       = "machine.openshift.io/instance-type"
	RegionLabel             = "machine.openshift.io/region"
	ZoneLabel               = "machine.openshift.io/zone"
	InstanceStateAnnotation = "machine.openshift.io/instance-state"
)

// Conditions in the provider status.
const (
	ConditionServerReady = "ServerReady"
	ConditionSpecInSync  = "SpecInSync"
	// ConditionSpecValid is there, False, while the Machine's provider
	// spec does not validate but its server exists (a stricter check of a
	// newer provider): the server is left as it is until the spec is
	// fixed.
	ConditionSpecValid = "SpecValid"
)

// providerStatus is the status a provider of this project writes; every
// cloud's status type has these fields under these names.
type providerStatus struct {
	metav1.TypeMeta `json:",inline"`
	InstanceID      string             `json:"instanceId,omitempty"`
	Status          string             `json:"status,omitempty"`
	Conditions      []metav1.Condition `json:"conditions,omitempty"`
}

func (a *Actuator) providerID(id string) string { return a.cloud.Name() + "://" + id }

// verifiedID is the server ID the provider recorded in the Machine's status
// (after finding the server carries the Machine's identity), "" if none. A
// provider ID alone may have been given by anyone who can write Machines.
func (a *Actuator) verifiedID(m *machinev1.Machine) string {
	if st, err := decodeStatus(m); err == nil {
		return st.InstanceID
	}
	return ""
}

// recordedID is the server ID the Machine already carries, "" if none.
func (a *Actuator) recordedID(m *machinev1.Machine) string {
	if st, err := decodeStatus(m); err == nil && st.InstanceID != "" {
		return st.InstanceID
	}
	if m.Spec.ProviderID != nil {
		if id, ok := strings.CutPrefix(*m.Spec.ProviderID, a.cloud.Name()+"://"); ok {
			return id
		}
	}
	return ""
}

// record writes what the Machine must show of its server: provider ID,
// addresses (NodeInternalDNS is the future Node's name, as the
// cluster-machine-approver checks), placement labels, state and the
// provider status; the create intent is done with. drift lists immutable
// fields the spec changed. Nothing is written when nothing changed.
func (a *Actuator) record(ctx context.Context, s *scope, server *cloud.Server, drift []string) error {
	m := s.machine
	original := m.DeepCopy()
	providerID := a.providerID(server.ID)
	m.Spec.ProviderID = &providerID
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[InstanceTypeLabel] = server.InstanceType
	m.Labels[RegionLabel] = server.Region
	m.Labels[ZoneLabel] = server.Zone
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[InstanceStateAnnotation] = server.Status
	delete(m.Annotations, CreateIntentAnnotation)
	addresses := append([]corev1.NodeAddress{}, server.Addresses...)
	m.Status.Addresses = append(addresses, hostnames(server.Name)...)
	st, err := decodeStatus(m)
	if err != nil {
		return err
	}
	wasReady := meta.IsStatusConditionTrue(st.Conditions, ConditionServerReady)
	st.InstanceID, st.Status = server.ID, server.Status
	ready := metav1.Condition{Type: ConditionServerReady, Status: metav1.ConditionFalse, Reason: "Booting", Message: "the server is " + server.Status}
	if server.Running {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, "Running", "the server is running"
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	inSync := metav1.Condition{Type: ConditionSpecInSync, Status: metav1.ConditionTrue, Reason: "InSync", Message: "the server matches the spec"}
	if s.invalid != nil {
		msg := cloud.Truncate(fmt.Sprintf("the provider spec does not validate, fix it: %v; until then nothing of it reaches the server, which runs on as it is", s.invalid))
		if prev := meta.FindStatusCondition(st.Conditions, ConditionSpecValid); prev == nil || prev.Message != msg {
			a.recorder.Event(m, corev1.EventTypeWarning, "InvalidSpec", msg)
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionSpecValid, Status: metav1.ConditionFalse, Reason: "InvalidSpec", Message: msg})
		inSync.Status, inSync.Reason, inSync.Message = metav1.ConditionUnknown, "InvalidSpec", "the server cannot be compared with a spec that does not validate"
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ConditionSpecValid)
	}
	if len(drift) > 0 {
		fields := make([]string, len(drift))
		for i, f := range drift {
			fields[i] = specPath.Child(f).String()
		}
		inSync.Status, inSync.Reason = metav1.ConditionFalse, "ReplacementRequired"
		inSync.Message = cloud.Truncate(fmt.Sprintf("%s changed, but a server cannot change it: replace the Machine (delete it; its MachineSet makes a new one)", strings.Join(fields, ", ")))
	}
	if prev := meta.FindStatusCondition(st.Conditions, ConditionSpecInSync); inSync.Status == metav1.ConditionFalse && (prev == nil || prev.Message != inSync.Message) {
		a.recorder.Event(m, corev1.EventTypeWarning, "ReplacementRequired", inSync.Message)
	}
	meta.SetStatusCondition(&st.Conditions, inSync)
	// The credentials worked: a condition that said otherwise is done.
	meta.RemoveStatusCondition(&st.Conditions, ConditionCredentials)
	// So was the server's zone.
	meta.RemoveStatusCondition(&st.Conditions, ConditionZone)
	// And the Machine records a server of its own.
	meta.RemoveStatusCondition(&st.Conditions, ConditionServerOwned)
	raw, err := encodeStatus(st)
	if err != nil {
		return err
	}
	m.Status.ProviderStatus = raw
	if server.Running && !wasReady {
		metrics.ObserveProvisioning(a.cloud.Name(), a.now().Sub(m.CreationTimestamp.Time))
	}
	if err := a.patch(ctx, original, m); err != nil {
		return err
	}
	a.recorded.Store(m.UID, server.ID)
	return nil
}

// justRecorded reports whether this process recorded the server on the
// Machine, which the copy m (from a cache behind that write) does not show.
func (a *Actuator) justRecorded(m *machinev1.Machine, id string) bool {
	v, ok := a.recorded.Load(m.UID)
	return ok && v.(string) == id
}

// patch writes the Machine's metadata and spec, then its status, each as a
// merge patch against what it was, and each only when it changes anything:
// no conflicts with the machine controller, which writes phase and
// conditions itself, and no API write in a steady-state resync.
func (a *Actuator) patch(ctx context.Context, original, m *machinev1.Machine) error {
	status := m.Status.DeepCopy()
	// The status has its own patch: against a base with the new status,
	// this one holds metadata and spec only, and a change of the status
	// alone sends nothing here (the API server would ignore a status on
	// the Machine itself, after all the work of a write).
	metaBase := original.DeepCopy()
	metaBase.Status = *status
	metaPatch := client.MergeFrom(metaBase)
	if changed, err := changes(metaPatch, m); err != nil {
		return err
	} else if changed {
		if err := a.client.Patch(ctx, m, metaPatch); err != nil {
			return fmt.Errorf("recording the server on the Machine: %w", err)
		}
	}
	// The patch answered with the stored status; put ours back and write it.
	base := m.DeepCopy()
	base.Status = original.Status
	m.Status = *status
	return a.patchStatus(ctx, base, m)
}

// patchStatus writes the status of m as a merge patch against base's, if
// it differs.
func (a *Actuator) patchStatus(ctx context.Context, base, m *machinev1.Machine) error {
	p := client.MergeFrom(base)
	changed, err := changes(p, m)
	if err != nil || !changed {
		return err
	}
	if err := a.client.Status().Patch(ctx, m, p); err != nil {
		return fmt.Errorf("recording the server in the Machine's status: %w", err)
	}
	return nil
}

// changes reports whether a merge patch changes anything.
func changes(p client.Patch, obj client.Object) (bool, error) {
	data, err := p.Data(obj)
	if err != nil {
		return false, err
	}
	return !bytes.Equal(bytes.TrimSpace(data), []byte("{}")), nil
}

// groupsDeleted reports empty anti-affinity groups a deletion removed.
func (a *Actuator) groupsDeleted(m *machinev1.Machine, names []string) {
	if len(names) == 0 {
		return
	}
	metrics.GroupsDeleted(a.cloud.Name(), len(names))
	a.recorder.Eventf(m, corev1.EventTypeNormal, "DeletedGroups", "Deleted empty %s anti-affinity group(s) %s", a.cloud.Name(), strings.Join(names, ", "))
}

// hostnames are the names a server's Node may have, as InternalDNS and
// Hostname addresses: its name, and for a name with a domain its first
// label too. cluster-machine-approver approves a new Node's client
// certificate only for a Machine with an InternalDNS address equal to the
// Node's name, and its serving certificate only if every DNS name in it is
// one of the Machine's InternalDNS, ExternalDNS or Hostname addresses. A
// server named <host>.<domain> (a spec's baseDomain, or a node Terraform
// made) may run a Node named <host>: the Terraform modules' Ignition, and
// adopt's user data (pkg/adopt), set that hostname.
func hostnames(name string) []corev1.NodeAddress {
	out := []corev1.NodeAddress{{Type: corev1.NodeInternalDNS, Address: name}, {Type: corev1.NodeHostName, Address: name}}
	if host, _, ok := strings.Cut(name, "."); ok && host != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: host}, corev1.NodeAddress{Type: corev1.NodeHostName, Address: host})
	}
	return out
}
