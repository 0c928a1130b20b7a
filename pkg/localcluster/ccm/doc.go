// Package ccm is the cloud-controller-manager of the local control plane: a
// test component that plays, on the emulators, the part each vendor's
// cloud-controller-manager plays on a cluster installed on platform
// External (cloudscale-ch/cloudscale-cloud-controller-manager,
// exoscale/exoscale-cloud-controller-manager).
//
// It is built on k8s.io/cloud-provider exactly as both vendors' binaries
// are: their main is app.NewCloudControllerManagerCommand with a cloud
// registered under the vendor's name, and so is clouds.Main. Only the two
// controllers a Node meets run — cloud-node (initializes a Node registered
// tainted node.cloudprovider.kubernetes.io/uninitialized: providerID,
// addresses, instance-type, zone and region labels; every 5 minutes its
// addresses again) and cloud-node-lifecycle (every 5 seconds, for each Node
// that is not Ready: a server that is gone deletes the Node, a stopped one
// taints it) — unmodified, with the framework's defaults. What differs per
// cloud is the cloud: clouds/cloudscale.go and clouds/exoscale.go follow the
// vendors' code call for call (each cites the file and tag it follows), through the
// official SDKs (cloudscale-go-sdk v8, egoscale v3) over HTTP, so the
// emulators answer the calls the real CCMs make, and the provider is tested
// against Nodes as those CCMs leave them.
//
// It runs as a process of its own beside the control plane's other
// processes (Start), not as a goroutine of a test: it has its own flags,
// klog, informers and log file, it can crash and be seen to, and it talks to
// the API server and the emulator only over the network. Its binary is
// bin/cloud-controller-manager, built by the Makefile for make demo, make
// e2e and make matrix from ./pkg/localcluster/ccm/cloud-controller-manager:
// a binary of its own rather than a subcommand of the provider's, so that
// the provider's binary and image (and their SBOM) carry none of
// k8s.io/cloud-provider and the API server, etcd client and gRPC code it
// brings. This package, which the demo links, only starts it; the clouds
// and Main are in ./clouds, whose own test runs its test binary as the CCM.
// Neither vendor's module is served by the Go module proxy, and their code
// is never copied, built or run here.
package ccm
