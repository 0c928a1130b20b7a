package demo

import "github.com/appuio/machine-api-provider/pkg/localcluster"

// HostPorts are the ports the demo's pods listen on, from their manifests:
// the cluster-autoscaler-operator's Deployment (install/07_deployment.yaml:
// its webhooks' WEBHOOKS_PORT 8443, the containerPort, and METRICS_PORT
// 9191) and the cluster-autoscaler's, which the operator renders (its
// "metrics" port, 8085). As root each pod has a network of its own; run by
// another user, the pods share this machine's, and these must be free.
var HostPorts = []int{8443, 9191, 8085}

// Preflight says, before anything starts, whether this machine can run
// the demo: its pods are chrooted (root, or an unprivileged user
// namespace), and when they share this machine's network their ports must
// be free.
func Preflight() error {
	if err := localcluster.CheckPodRunner(); err != nil {
		return err
	}
	if localcluster.SharesHostNetwork() {
		return localcluster.CheckHostPorts("the cluster-autoscaler-operator (8443, 9191) or the cluster-autoscaler (8085)", HostPorts...)
	}
	return nil
}
