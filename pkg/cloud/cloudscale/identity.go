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

// serverName is the server's hostname, which becomes the Node's name.
func serverName(machine string, p *v1beta1.CloudscaleMachineProviderSpec) string {
	if p.BaseDomain == "" {
		return machine
	}
	return machine + "." + p.BaseDomain
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
