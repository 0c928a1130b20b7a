package v1beta1

// Tags that mark a server (and its root volume and server groups) as the
// provider's. The keys are those of the cloudscale.ch provider already in
// use, so servers it created are found again after a switch.
const (
	// TagMachineName holds the Machine's name.
	TagMachineName = "machine-api-provider-cloudscale_appuio_io_name"
	// TagClusterID holds the cluster's infrastructure name, the value of the
	// machine.openshift.io/cluster-api-cluster label.
	TagClusterID = "machine-api-provider-cloudscale_appuio_io_cluster_id"
	// TagAntiAffinityKey holds the antiAffinityKey on server groups.
	TagAntiAffinityKey = "machine-api-provider-cloudscale_appuio_io_antiAffinityKey"
)

// ReservedTags are the tag keys users may not set themselves.
var ReservedTags = []string{TagMachineName, TagClusterID, TagAntiAffinityKey}
