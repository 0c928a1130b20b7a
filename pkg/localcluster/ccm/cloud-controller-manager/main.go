// Command cloud-controller-manager is the local control plane's
// cloud-controller-manager (pkg/localcluster/ccm): k8s.io/cloud-provider's
// controllers with a cloud of each vendor's rules, --cloud-provider
// cloudscale or exoscale. A test component, a binary of its own
// (bin/cloud-controller-manager, which the Makefile builds for make demo,
// make e2e and make matrix) so that the provider's binary and image carry
// none of k8s.io/cloud-provider.
package main

import (
	"os"

	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm/clouds"
)

func main() { os.Exit(clouds.Main(os.Args[1:])) }
