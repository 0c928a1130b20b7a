package exoscale

import (
	"errors"
	"maps"
	"sort"
	"strings"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// checkRef refuses an incomplete MachineRef: an empty value would make the
// label filter match the instances of every Machine or cluster.
func checkRef(m cloud.MachineRef) error {
	if m.Name == "" || m.ClusterID == "" {
		return errors.New("exoscale: a MachineRef needs the Machine's name and the cluster ID")
	}
	return nil
}

// selectorLabels are the labels a Selector filters on.
func selectorLabels(sel cloud.Selector) map[string]string {
	l := map[string]string{v1beta1.LabelClusterID: sel.ClusterID}
	if sel.Machine != "" {
		l[v1beta1.LabelMachineName] = sel.Machine
	}
	return l
}

// labelFilter renders labels as the list's filter: "k=v k2=v2", sorted.
// Identity values (a cluster's infrastructure name, a Machine's name) hold
// no spaces, so the filter is unambiguous.
func labelFilter(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, " ")
}

// filterable says whether a selector's values can be filtered on.
func filterable(sel cloud.Selector) bool {
	return !strings.ContainsAny(sel.ClusterID+sel.Machine, " =\t\n")
}

// instanceLabels are the labels the instance should have: the user's, then
// the provider's, which win (validation forbids them in the spec anyway).
func instanceLabels(m cloud.MachineRef, p *v1beta1.ExoscaleMachineProviderSpec) map[string]string {
	l := map[string]string{}
	maps.Copy(l, p.Labels)
	maps.Copy(l, selectorLabels(cloud.Selector{ClusterID: m.ClusterID, Machine: m.Name}))
	return l
}

// matches applies a label filter as the API does.
func matches(have, filter map[string]string) bool {
	for k, v := range filter {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}
