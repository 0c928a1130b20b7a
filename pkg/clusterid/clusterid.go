// Package clusterid is the cluster's identity as every part of the provider
// holds it: the ID it is pinned to, the Infrastructure's
// status.infrastructureName (never read from a label), and the legacy
// cluster IDs a cluster admin declared this cluster also owns.
//
// Why legacy IDs. The clusters appuio's Terraform modules built carry the
// module's cluster_id (the Project Syn ID) where the Machine API looks for
// the cluster: the Machines and MachineSets the modules' outputs describe
// are labelled machine.openshift.io/cluster-api-cluster = var.cluster_id
// (appuio/terraform-openshift4-cloudscale, modules/node-group/outputs.tf),
// appuio's provider tags their servers with that label, and the modules tag
// the servers they make adoptable with it. The installer's
// infrastructureName is that ID plus five random characters. Declaring the
// ID makes those Machines, MachineSets, servers and groups this cluster's
// as they are: nothing is relabelled or retagged, so appuio's provider (after
// a rollback), Terraform and Argo CD keep finding them as they wrote them.
//
// The declaration is an annotation of the Infrastructure named cluster
// (LegacyAnnotation), which only cluster admins may write, beside the
// infrastructureName it extends. The deployer renders it as the manager's
// --legacy-cluster-ids, a flag the manager ConfigMap cannot set; the
// webhooks, switch-from-appuio and adopt read it from the Infrastructure.
// A label or a ConfigMap a namespace writer controls never declares one.
package clusterid

import (
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Label names the cluster of a Machine or MachineSet; servers are tagged
// (or labelled) with its value.
const Label = "machine.openshift.io/cluster-api-cluster"

// LegacyAnnotation, on the Infrastructure named InfrastructureName, lists
// the legacy cluster IDs this cluster owns, comma-separated.
const LegacyAnnotation = "machine.appuio.io/legacy-cluster-ids"

// InfrastructureName is the name of the cluster's one Infrastructure.
const InfrastructureName = "cluster"

// MaxLegacy bounds the legacy IDs one cluster declares: each is swept by
// the janitor with a list of its own.
const MaxLegacy = 8

// IDs is the cluster's identity: the ID it is pinned to and the legacy IDs
// it also owns. The ownership rules hold for each alike: a Machine or
// MachineSet whose label names one of them is the cluster's, and a server
// is a Machine's when it carries the ID the Machine's label names and the
// Machine's name.
type IDs struct {
	// Own is the pinned ID, the Infrastructure's infrastructureName.
	Own string
	// Legacy are the declared legacy IDs, sorted, none of them Own.
	Legacy []string
}

// Owns says whether id is the cluster's (its own, or declared).
func (i IDs) Owns(id string) bool {
	return id != "" && (id == i.Own || slices.Contains(i.Legacy, id))
}

// IsLegacy says whether id is a declared legacy ID.
func (i IDs) IsLegacy(id string) bool { return id != "" && slices.Contains(i.Legacy, id) }

// All are the IDs the cluster owns, its own first.
func (i IDs) All() []string {
	if i.Own == "" {
		return slices.Clone(i.Legacy)
	}
	return append([]string{i.Own}, i.Legacy...)
}

// Besides are the IDs the cluster owns other than id, its own first: a
// Machine labelled id may join resources that carry any of them
// (pkg/cloud, MachineRef.AlsoOwns).
func (i IDs) Besides(id string) []string {
	return slices.DeleteFunc(i.All(), func(o string) bool { return o == id })
}

// Describe names the IDs for messages: `"c-x-7k2p" (the infrastructureName)`,
// with `and the declared legacy ID(s) "a", "b"`.
func (i IDs) Describe() string {
	s := fmt.Sprintf("%q (the Infrastructure's infrastructureName)", i.Own)
	if len(i.Legacy) == 0 {
		return s
	}
	q := make([]string, len(i.Legacy))
	for k, id := range i.Legacy {
		q[k] = fmt.Sprintf("%q", id)
	}
	return s + " and the declared legacy cluster ID " + strings.Join(q, ", ")
}

// NotOurs says that an object of the kind ("Machine", "MachineSet") names
// a cluster id this one does not own, and the two ways out: fix the label,
// or declare the ID where the cluster does own what carries it. The
// actuator, the capacity publisher and the webhooks say it in these words.
func (i IDs) NotOurs(id, kind string) string {
	return fmt.Sprintf("names cluster %q, and this cluster is %s: a %s of another cluster is never acted on, nor its servers touched; fix the label or delete the %s, or, if %q is this cluster's own legacy ID (the Terraform modules' cluster_id, which fleet clusters' Machines and servers carry), declare it: %s",
		id, i.Describe(), kind, kind, id, i.DeclareCommand(id))
}

// DeclareCommand is the command that declares more legacy IDs, keeping
// those declared already.
func (i IDs) DeclareCommand(more ...string) string {
	all := slices.Clone(i.Legacy)
	for _, id := range more {
		if !slices.Contains(all, id) && id != i.Own {
			all = append(all, id)
		}
	}
	slices.Sort(all)
	return DeclareCommand(all...)
}

// DeclareCommand is the command that declares exactly ids as the cluster's
// legacy IDs.
func DeclareCommand(ids ...string) string {
	return fmt.Sprintf("oc annotate --overwrite infrastructure.config.openshift.io %s %s=%s", InfrastructureName, LegacyAnnotation, strings.Join(ids, ","))
}

// ParseLegacy reads a list of legacy IDs (LegacyAnnotation's value, the
// manager's --legacy-cluster-ids): comma-separated, spaces around each
// ignored; each must be a label value (the Machines' label carries it), not
// own, named once. "" is none.
func ParseLegacy(value, own string) ([]string, error) {
	var out []string
	for _, id := range strings.Split(value, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if msgs := validation.IsValidLabelValue(id); len(msgs) > 0 {
			return nil, fmt.Errorf("legacy cluster ID %q: %s (it is the value of the label %s)", id, strings.Join(msgs, "; "), Label)
		}
		if id == own {
			return nil, fmt.Errorf("legacy cluster ID %q is the cluster's own ID, the infrastructureName: declare only the other IDs its objects carry", id)
		}
		if slices.Contains(out, id) {
			return nil, fmt.Errorf("legacy cluster ID %q is named twice", id)
		}
		out = append(out, id)
	}
	if len(out) > MaxLegacy {
		return nil, fmt.Errorf("%d legacy cluster IDs, at most %d", len(out), MaxLegacy)
	}
	slices.Sort(out)
	return out, nil
}

// FromInfrastructure is the identity an Infrastructure gives: its
// infrastructureName and the legacy IDs its annotation declares. An
// annotation that does not parse is an error saying how to fix it.
func FromInfrastructure(infra *configv1.Infrastructure) (IDs, error) {
	ids := IDs{Own: infra.Status.InfrastructureName}
	legacy, err := ParseLegacy(infra.Annotations[LegacyAnnotation], ids.Own)
	if err != nil {
		return ids, fmt.Errorf("the annotation %s of the Infrastructure %s: %w; fix it with oc edit infrastructure.config.openshift.io %s", LegacyAnnotation, InfrastructureName, err, InfrastructureName)
	}
	ids.Legacy = legacy
	return ids, nil
}
