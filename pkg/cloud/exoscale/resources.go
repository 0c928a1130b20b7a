package exoscale

import (
	"strings"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
)

// Whose a resource a spec names is (pkg/cloud, resources.go). Of what an
// instance joins, Exoscale labels private networks only (egoscale v3.1.43,
// schemas.go: PrivateNetwork has Labels; SecurityGroup, AntiAffinityGroup,
// Template and DeployTarget have a name and a description, no labels). So a
// private network is a cluster's by the provider's cluster label, and any
// of them by the provider's mark at the start of its description,
//
//	machine-api-provider cluster=<cluster> ...
//
// which the provider writes on its own anti-affinity groups
// (antiaffinity.go) and an admin may write on a security group, a template
// or a network to keep other clusters' servers out of it. The Terraform
// module's resources carry neither: they are joined as the spec names them.

// markDescription is where the identity of a resource without labels is.
const markDescription = "description " + groupMarker + " cluster=..."

// describedCluster is the cluster a description marks its resource as
// the provider's for, "" for none.
func describedCluster(description string) string {
	f := strings.Fields(description)
	if len(f) < 2 || f[0] != groupMarker {
		return ""
	}
	cluster, _ := strings.CutPrefix(f[1], "cluster=")
	if cluster == f[1] {
		return ""
	}
	return cluster
}

// networkCluster is the cluster a private network carries the identity of,
// and where: its label, else its description.
func networkCluster(n v3.PrivateNetwork) (cluster, mark string) {
	if id := n.Labels[v1beta1.LabelClusterID]; id != "" {
		return id, "label " + v1beta1.LabelClusterID
	}
	return describedCluster(n.Description), markDescription
}
