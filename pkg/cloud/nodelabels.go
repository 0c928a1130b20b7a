package cloud

import corev1 "k8s.io/api/core/v1"

// NodeLabels are the well-known labels a cloud-controller-manager gives a
// Node it initializes: k8s.io/cloud-provider's cloud-node controller writes
// the instance type, zone and region its cloud returns under these keys
// (controllers/node/node_controller.go, getNodeModifiersFromCloudProvider;
// each also under its deprecated beta key, which nothing here promises).
// An empty value is a label the CCM does not set. Each cloud's
// Spec.NodeLabels says which values its vendor's CCM returns.
func NodeLabels(instanceType, zone, region string) map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{
		corev1.LabelInstanceTypeStable: instanceType,
		corev1.LabelTopologyZone:       zone,
		corev1.LabelTopologyRegion:     region,
	} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}
