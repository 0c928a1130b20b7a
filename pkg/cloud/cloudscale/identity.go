package cloudscale

import (
	"crypto/sha256"
	"errors"
	"maps"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// checkRef refuses an incomplete MachineRef: an empty value would turn the
// tag filter "tag:k=v" into "tag:k=" (key present), which matches the servers
// of every Machine or cluster.
func checkRef(m cloud.MachineRef) error {
	if m.Name == "" || m.ClusterID == "" {
		return errors.New("cloudscale: a MachineRef needs the Machine's name and the cluster ID")
	}
	return nil
}

// serverName is the name a new server gets: the Machine's, which is the
// hostname its Ignition sets (the Terraform modules', adopt's, the docs'
// template) and so its Node's name. A Node whose kubelet was given no
// providerID is found by the cloudscale.ch cloud-controller-manager only
// through a server of exactly its name (GET /v1/servers; server_mapper.go
// of cloudscale-ch/cloudscale-cloud-controller-manager 1.3.0): a server
// named <machine>.<baseDomain>, as baseDomain once made it, left that Node
// uninitialized — no providerID, no address, never linked to its Machine.
// The spec's baseDomain no longer changes the name; see ownName.
func serverName(machine string, _ *v1beta1.CloudscaleMachineProviderSpec) string {
	return machine
}

// ownName says whether a server's name is one the Machine's server may
// have: its Machine's, or <machine>.<baseDomain> for a server made before
// (by an older release or appuio's provider from a spec with baseDomain, or
// by Terraform and adopted), which is the Machine's all the same. Servers
// are found by their tags, never by name; the name only tells whether the
// server is what the spec describes (SpecInSync).
func ownName(name, machine string, p *v1beta1.CloudscaleMachineProviderSpec) bool {
	return name == serverName(machine, p) || p.BaseDomain != "" && name == machine+"."+p.BaseDomain
}

// selectorTags are the tags a Selector filters on.
func selectorTags(sel cloud.Selector) map[string]string {
	t := map[string]string{v1beta1.TagClusterID: sel.ClusterID}
	if sel.Machine != "" {
		t[v1beta1.TagMachineName] = sel.Machine
	}
	return t
}

// machineTags identify the Machine's server and root volume.
func machineTags(m cloud.MachineRef) map[string]string {
	return selectorTags(cloud.Selector{ClusterID: m.ClusterID, Machine: m.Name})
}

// serverTags are the tags the server should have: the user's, then the
// provider's, which win (validation forbids them in the spec anyway).
func serverTags(m cloud.MachineRef, p *v1beta1.CloudscaleMachineProviderSpec) sdk.TagMap {
	t := sdk.TagMap{}
	maps.Copy(t, p.Tags)
	maps.Copy(t, machineTags(m))
	return t
}

// rootVolumeTags are the machine tags and the spec's rootVolumeTags. The
// server's user tags are not copied: rootVolumeTags says what the volume gets.
func rootVolumeTags(m cloud.MachineRef, p *v1beta1.CloudscaleMachineProviderSpec) sdk.TagMap {
	t := sdk.TagMap{}
	maps.Copy(t, p.RootVolumeTags)
	maps.Copy(t, machineTags(m))
	return t
}

// tagsHash identifies a tag map independent of its order.
func tagsHash(t map[string]string) [sha256.Size]byte {
	h := sha256.New()
	for _, k := range sortedKeys(t) {
		// Keys and values cannot hold NUL in practice; it separates them
		// unambiguously.
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(t[k]))
		h.Write([]byte{0})
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

// matchesFilter applies a tag filter as the API does: an empty value asks
// for the key only.
func matchesFilter(have, filter map[string]string) bool {
	for k, v := range filter {
		hv, ok := have[k]
		if !ok || v != "" && hv != v {
			return false
		}
	}
	return true
}
