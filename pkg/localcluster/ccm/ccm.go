package ccm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// The clouds, by the names their CCMs register (and so the schemes of the
// providerIDs they set).
const (
	Cloudscale = "cloudscale"
	Exoscale   = "exoscale"
)

// The environment each vendor's CCM reads its API and credentials from.
const (
	CloudscaleTokenEnv   = "CLOUDSCALE_ACCESS_TOKEN"
	CloudscaleURLEnv     = "CLOUDSCALE_API_URL"
	CloudscaleTimeoutEnv = "CLOUDSCALE_API_TIMEOUT"

	ExoscaleKeyEnv        = "EXOSCALE_API_KEY"
	ExoscaleSecretEnv     = "EXOSCALE_API_SECRET"
	ExoscaleEndpointEnv   = "EXOSCALE_API_ENDPOINT"
	ExoscaleZoneEnv       = "EXOSCALE_API_ZONE"
	ExoscaleLegacyZoneEnv = "EXOSCALE_ZONE"
)

// CloudscaleEnv is the environment of a cloudscale.ch CCM talking to the
// API at url ("http://127.0.0.1:port/") with token.
func CloudscaleEnv(url, token string) []string {
	return []string{CloudscaleURLEnv + "=" + url, CloudscaleTokenEnv + "=" + token}
}

// ExoscaleEnv is the environment of an Exoscale CCM of zone talking to the
// API at endpoint ("http://127.0.0.1:port/v2") with the key and secret.
func ExoscaleEnv(endpoint, key, secret, zone string) []string {
	return []string{ExoscaleEndpointEnv + "=" + endpoint, ExoscaleKeyEnv + "=" + key, ExoscaleSecretEnv + "=" + secret, ExoscaleZoneEnv + "=" + zone}
}

// ProcessName is the CCM's name among the control plane's processes and its
// binary's name in bin/ (the Makefile builds it there): its log is
// <Dir>/cloud-controller-manager.log, and the field manager of its writes
// (the user agent's program name) is the same.
const ProcessName = "cloud-controller-manager"

// Options say which CCM Start runs.
type Options struct {
	// Cloud is Cloudscale or Exoscale.
	Cloud string
	// Env holds the cloud's API address and credentials: CloudscaleEnv or
	// ExoscaleEnv.
	Env []string
	// Binary is the CCM's executable: bin/cloud-controller-manager
	// (./pkg/localcluster/ccm/cloud-controller-manager).
	Binary string
	// Verbosity of its log (klog's -v); default 2, which logs every Node
	// it initializes and deletes.
	Verbosity int
}

// Start runs the CCM as a process of the control plane (stopped with it),
// with the command line the vendors' manifests give theirs, narrowed to the
// Node controllers: the admin kubeconfig, no leader election, no serving
// port (nothing scrapes it here).
func Start(c *localcluster.Cluster, o Options) (*localcluster.Process, error) {
	if o.Cloud != Cloudscale && o.Cloud != Exoscale {
		return nil, fmt.Errorf("no cloud-controller-manager for cloud %q", o.Cloud)
	}
	if o.Verbosity == 0 {
		o.Verbosity = 2
	}
	bin, err := filepath.Abs(o.Binary)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		return nil, fmt.Errorf("the cloud-controller-manager %s: %w (the Makefile builds it: make %s)", o.Binary, err, filepath.Join("bin", ProcessName))
	}
	// Started through a link named as the CCM: a client's default user
	// agent, and so the field manager of every write it makes and the
	// audit log's userAgent, is its program's name, also when the binary
	// is a test's. The CCM's writes to a Node then say they are its own.
	link := filepath.Join(filepath.Dir(c.Kubeconfig), ProcessName)
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err := os.Symlink(bin, link); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--cloud-provider=" + o.Cloud,
		"--allow-untagged-cloud",
		"--controllers=cloud-node-controller,cloud-node-lifecycle-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--v=" + strconv.Itoa(o.Verbosity),
	}
	return c.StartProcess(ProcessName, link, args, o.Env)
}
