// Package matrix holds `make matrix`: the Machine API controllers of several
// OpenShift eras — the machine-api-operator's own machineset, nodelink and
// machine-healthcheck binaries of each era (bin/mao-<era>/), not the
// library this module pins — run as the deployer renders them for that
// release, beside this provider, on each cloud's emulator.
//
// For each era and cloud the test stands up a local control plane shaped
// like an OpenShift cluster of that release: the era's Machine API CRDs,
// webhook Services and webhook configurations (as its machine-api-operator
// installs them, the service CA's part played by a test CA), the
// config.openshift.io objects (an External Infrastructure, the DNS, a
// ClusterVersion of the era, the Proxy), the images ConfigMap naming the
// era's image, and the install of config/overlays/<cloud> with exactly its
// RBAC and webhooks. A Node of this machine (localcluster.RunNode) takes
// the deployer's pod, which the pod runner (localcluster.RunPod) runs as
// its service account; the deployer applies the controllers' Deployment,
// whose pod the runner then runs: the era's three binaries and the
// provider's static binary as the machine-controller, each with exactly
// the arguments, environment and mounts of the Deployment, each
// authenticated with its service account's token. Machine and MachineSet
// writes go through the era's webhooks and the provider's, served by that
// pod, reached through their Services and the EndpointSlices of the pod's
// status, as on a cluster.
//
// It then checks, and prints as a table of era x cloud x check: the
// deployer renders the era's release; every container starts and passes
// its probes; the webhooks answer; a MachineSet scales 0 -> 3 on the
// emulator; the Machines get their Nodes (nodeRef); the MachineSet's status
// (replicas, ready, available) follows; a MachineHealthCheck replaces a
// Machine whose Node went silent; the MachineSet scales back to 0; no
// container ever exits; and no request of any service account is refused
// by RBAC (403s in the API server's audit log). It also reports the verbs
// the RBAC grants that an era's run never used.
//
// TestMatrix runs only with MATRIX=1 (`make matrix`, which builds the
// binaries first); `make test` runs the checks that need no control plane:
// the Makefile's pins agree with pkg/controllers/deployer/releases.go.
package matrix
