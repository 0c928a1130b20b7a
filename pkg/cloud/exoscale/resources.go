package exoscale

import (
	"strings"

	v3 "github.com/exoscale/egoscale/v3"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
)

// Whose a resource is. Of what an instance joins, Exoscale labels private
// networks only (egoscale v3.1.43, schemas.go: PrivateNetwork has Labels;
// SecurityGroup, AntiAffinityGroup, Template and DeployTarget have a name
// and a description, no labels). So a private network is a cluster's by the
// provider's cluster label, and any resource without labels by the
// provider's mark at the start of its description,
//
//	machine-api-provider cluster=<cluster> ...
//
// which the provider writes on everything without labels it makes: its
// anti-affinity groups (antiaffinity.go) and the templates the boot image
// controller and `images import` register (images.go). An admin may write
// it on a security group, a template or a network to keep other clusters'
// servers out of it. The Terraform module's resources carry neither: they
// are joined as the spec names them.
//
// DescribedClusterID is the one reader of that mark: every judge of such a
// resource reads it with this function (the spec's checks, CheckSpec and
// the sync's security groups; the janitor's and adopt's groups, through
// parseGroup; the boot images' templates, ourTemplate, before a list, a
// copy and a delete; the tests' ownership audit, test/ownaudit). What the
// provider made adds what the mark's kind needs on top (a group's name and
// key, a template's maintainer, version and build), never another identity.

// markDescription is where the identity of a resource without labels is.
const markDescription = "description " + groupMarker + " cluster=..."

// DescribedClusterID is the cluster a description marks its resource as
// the provider's for, "" for none.
func DescribedClusterID(description string) string {
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
	return DescribedClusterID(n.Description), markDescription
}
