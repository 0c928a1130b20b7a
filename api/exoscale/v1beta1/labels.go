package v1beta1

// Labels that mark an instance as the provider's: the cluster and the
// Machine. Exoscale labels are key/value pairs; the keys are DNS-style with
// a prefix, as Exoscale's own Kubernetes tooling writes them, and the values
// (a cluster's infrastructure name, a Machine's name) hold neither spaces
// nor "=", so they can be filtered on (the list filter is "k=v k2=v2").
const (
	// LabelClusterID holds the cluster's infrastructure name, the value of
	// the machine.openshift.io/cluster-api-cluster label.
	LabelClusterID = "machine-api-provider.appuio.io/cluster-id"
	// LabelMachineName holds the Machine's name.
	LabelMachineName = "machine-api-provider.appuio.io/machine"
)

// ReservedLabels are the label keys users may not set themselves.
var ReservedLabels = []string{LabelClusterID, LabelMachineName}
