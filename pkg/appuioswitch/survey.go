package appuioswitch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

// clusterLabel is the Machines' cluster ID, which tags their servers.
const clusterLabel = "machine.openshift.io/cluster-api-cluster"

// Survey is what the cluster holds of appuio's provider and of this one.
type Survey struct {
	// ClusterID is the Machines' cluster ID.
	ClusterID string
	// Identity is the cluster's: its infrastructureName and the legacy IDs
	// declared (pkg/clusterid); empty where no Infrastructure is served.
	Identity clusterid.IDs
	// Machines and MachineSets are those in the cloudscale.ch spec format
	// (appuio's and this provider's are one).
	Machines    []machinev1.Machine
	MachineSets []machinev1.MachineSet
	// Secrets are those the specs name, by name.
	Secrets map[string]*NamedSecret
	// Deployments that exist, by name: appuio's, ours and the deployer.
	Deployments map[string]bool
	// Leases, by name, of those that matter here and exist.
	Leases map[string]*coordinationv1.Lease
	// Record is the switch's record (nil before the first step).
	Record *corev1.ConfigMap
	// Blockers are what must be fixed before a change: each says what.
	Blockers []string
	// Notes are what the admin should know and need not fix first.
	Notes []string
	// Pause is what the switch pauses (pause.go); GitOps what Argo CD or
	// Flux keeps in sync of what it touches (gitops.go).
	Pause  *Pause
	GitOps *GitOps
}

// NamedSecret is a Secret a spec names.
type NamedSecret struct {
	Name string
	// Fields are the spec fields naming it ("tokenSecret", ...).
	Fields []string
	// Users counts the Machines and MachineSets naming it.
	Users int
	// Exists: the Secret is there; Component: it is the component's (Argo
	// CD deletes it with the component); Copy: a saved copy is there.
	Exists, Component, Copy bool
}

// Phase is the recorded step.
func (s *Survey) Phase() string {
	if s.Record == nil {
		return ""
	}
	return s.Record.Data["phase"]
}

// survey reads the cluster. Nothing changes.
func (w *Switch) survey(ctx context.Context) (*Survey, error) {
	ns := w.o.Namespace
	s := &Survey{Secrets: map[string]*NamedSecret{}, Deployments: map[string]bool{}, Leases: map[string]*coordinationv1.Lease{}}
	var machines machinev1.MachineList
	if err := w.kube.List(ctx, &machines, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	var sets machinev1.MachineSetList
	if err := w.kube.List(ctx, &sets, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing MachineSets: %w", err)
	}
	clusters := map[string]bool{}
	for _, m := range machines.Items {
		if !cloudscaleSpec(m.Spec.ProviderSpec) {
			continue
		}
		s.Machines = append(s.Machines, m)
		clusters[m.Labels[clusterLabel]] = true
		w.checkSpec(s, "Machine "+m.Name, m.Spec.ProviderSpec, field.NewPath("spec", "providerSpec", "value"))
	}
	for _, ms := range sets.Items {
		if !cloudscaleSpec(ms.Spec.Template.Spec.ProviderSpec) {
			continue
		}
		s.MachineSets = append(s.MachineSets, ms)
		// The label its Machines get, which the webhook checks on every
		// change of the MachineSet (an Argo CD sync).
		clusters[ms.Spec.Template.Labels[clusterLabel]] = true
		w.checkSpec(s, "MachineSet "+ms.Name, ms.Spec.Template.Spec.ProviderSpec, field.NewPath("spec", "template", "spec", "providerSpec", "value"))
	}
	delete(clusters, "")
	switch {
	case len(clusters) > 1:
		s.Blockers = append(s.Blockers, fmt.Sprintf("the Machines and MachineSets name %d clusters (label %s): %s; one cluster's Machines only", len(clusters), clusterLabel, strings.Join(slices.Sorted(maps.Keys(clusters)), ", ")))
	case len(clusters) == 1:
		s.ClusterID = slices.Sorted(maps.Keys(clusters))[0]
	}
	if err := w.checkIdentity(ctx, s); err != nil {
		return nil, err
	}
	for _, m := range s.Machines {
		if m.Labels[clusterLabel] == "" {
			s.Blockers = append(s.Blockers, fmt.Sprintf("Machine %s has no %s label: no provider can find its server", m.Name, clusterLabel))
		}
	}
	for name, sec := range s.Secrets {
		var got corev1.Secret
		err := w.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &got)
		switch {
		case err == nil:
			sec.Exists = true
			sec.Component = got.Labels[ComponentInstanceLabel] == ComponentInstance
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading secret %s: %w", name, err)
		}
		err = w.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: CopyPrefix + name}, &got)
		switch {
		case err == nil:
			sec.Copy = got.Labels[CopyOfLabel] == name
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading secret %s: %w", CopyPrefix+name, err)
		}
	}
	for _, name := range []string{ManagerDeployment, ControllersDeployment, ourDeployment, deployerDeployment} {
		err := w.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{})
		switch {
		case err == nil:
			s.Deployments[name] = true
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading Deployment %s: %w", name, err)
		}
	}
	for _, name := range append([]string{ManagerLease, ControllersManagerLease, ourLease, deployerLease}, operatorLeases...) {
		var l coordinationv1.Lease
		err := w.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &l)
		switch {
		case err == nil:
			s.Leases[name] = &l
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading lease %s: %w", name, err)
		}
	}
	var rec corev1.ConfigMap
	err := w.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: RecordConfigMap}, &rec)
	switch {
	case err == nil:
		s.Record = &rec
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading ConfigMap %s: %w", RecordConfigMap, err)
	}
	if err := w.surveyPause(ctx, s); err != nil {
		return nil, err
	}
	if err := w.surveyGitOps(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// cloudscaleSpec says whether a provider spec is in the cloudscale.ch
// format: its kind and apiVersion, or neither (appuio's provider requires
// neither), with a zone and a flavor.
func cloudscaleSpec(ps machinev1.ProviderSpec) bool {
	if ps.Value == nil {
		return false
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Zone       string `json:"zone"`
		Flavor     string `json:"flavor"`
	}
	if err := json.Unmarshal(ps.Value.Raw, &head); err != nil {
		return false
	}
	if head.Kind != "" || head.APIVersion != "" {
		return head.Kind == v1beta1.SpecKind && (head.APIVersion == "" || strings.HasPrefix(head.APIVersion, v1beta1.Group+"/"))
	}
	return head.Zone != "" && head.Flavor != ""
}

// checkSpec parses a spec as this provider will, a blocker when it would
// refuse it (it would fail a running Machine), and notes the Secrets it
// names.
func (w *Switch) checkSpec(s *Survey, what string, ps machinev1.ProviderSpec, path *field.Path) {
	spec, errs := v1beta1.SpecFromProviderSpec(ps, path)
	if len(errs) > 0 {
		s.Blockers = append(s.Blockers, fmt.Sprintf("%s: this provider would refuse its spec: %v", what, errs.ToAggregate()))
		return
	}
	if unknown := webhooks.UnknownFields(ps.Value.Raw, &v1beta1.CloudscaleMachineProviderSpec{}); len(unknown) > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: its spec has fields neither provider knows, ignored by both: %s", what, strings.Join(unknown, ", ")))
	}
	note := func(name, fieldName string) {
		sec := s.Secrets[name]
		if sec == nil {
			sec = &NamedSecret{Name: name}
			s.Secrets[name] = sec
		}
		if !slices.Contains(sec.Fields, fieldName) {
			sec.Fields = append(sec.Fields, fieldName)
		}
		sec.Users++
	}
	if spec.TokenSecret != nil {
		note(spec.TokenSecret.Name, "tokenSecret")
	}
	if spec.UserDataSecret != nil {
		note(spec.UserDataSecret.Name, "userDataSecret")
	}
}

// live says whether a lease is held and was renewed within its duration,
// by the API server's record and this host's clock.
func live(l *coordinationv1.Lease, now time.Time) bool {
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return false
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
