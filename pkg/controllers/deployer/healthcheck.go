package deployer

// What pauses a MachineHealthCheck: the machine-healthcheck controller of
// every known release (4.14 to 5.0) returns from Reconcile before it looks
// at any Machine when the MachineHealthCheck carries the annotation
// cluster.x-k8s.io/paused, whatever its value (machine-api-operator,
// release-4.14 to release-5.0 and main,
// pkg/controller/machinehealthcheck/machinehealthcheck_controller.go:
// `if annotations.IsPaused(mhc)`, and pkg/util/annotations/helpers.go:
// PausedAnnotation, HasPausedAnnotation checks the key only). A journey
// that must keep remediation off for a while (switch-from-appuio) sets it
// and takes it off again.

import configv1 "github.com/openshift/api/config/v1"

// MHCPausedAnnotation is the annotation r's machine-healthcheck controller
// skips a MachineHealthCheck for; "" for a release older than the known
// ones, whose controller is not known to honour one.
func (r Release) MHCPausedAnnotation() string {
	if r.before(Releases[0]) {
		return ""
	}
	return "cluster.x-k8s.io/paused"
}

// ReleaseOf is the release of the cluster's ClusterVersion cv (the oldest
// one an upgrade under way may still run), and how it fits the known ones.
func ReleaseOf(cv *configv1.ClusterVersion) (Release, Fit) {
	if cv == nil {
		return ForVersion("")
	}
	return ForVersion(renderVersion(cv))
}
