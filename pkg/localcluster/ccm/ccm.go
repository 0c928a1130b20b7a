package ccm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/appuio/machine-api-provider/pkg/localcluster"
)

// The clouds, by the names their CCMs register (and so the schemes of the
// providerIDs they set).
const (
	Cloudscale = cloudscaleName
	Exoscale   = exoscaleName
)

// childEnv, set to a cloud's name, makes the process a CCM of that cloud
// (init below): Start sets it on the process it starts.
const childEnv = "LOCALCLUSTER_CLOUD_CONTROLLER_MANAGER"

func init() {
	cloudprovider.RegisterCloudProvider(cloudscaleName, newCloudscale)
	cloudprovider.RegisterCloudProvider(exoscaleName, newExoscale)
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(Main(name, os.Args[1:]))
	}
}

// Main runs the CCM of cloud with the command line args (without the
// program's name), as the vendors' main functions do, and returns the exit
// code.
func Main(cloud string, args []string) int {
	o, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		fmt.Fprintf(os.Stderr, "unable to initialize command options: %v\n", err)
		return 1
	}
	// as both vendors' mains: this binary runs one provider only
	o.KubeCloudShared.CloudProvider.Name = cloud
	cmd := app.NewCloudControllerManagerCommand(o, initialize, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// initialize is both vendors' cloudInitializer: the registered cloud, and
// without a cluster ID only with --allow-untagged-cloud.
func initialize(c *config.CompletedConfig) cloudprovider.Interface {
	cc := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(cc.Name, cc.CloudConfigFile)
	if err != nil {
		klog.Fatalf("Cloud provider could not be initialized: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("Cloud provider is nil")
	}
	if !cloud.HasClusterID() {
		if !c.ComponentConfig.KubeCloudShared.AllowUntaggedCloud {
			klog.Fatalf("No ClusterID found. A ClusterID is required for the cloud provider to function properly. This check can be bypassed by setting the allow-untagged-cloud option")
		}
		klog.Warning("Detected a cluster without a ClusterID. A ClusterID will be required in the future. Please tag your cluster to avoid any future issues")
	}
	return cloud
}

// Options say which CCM Start runs.
type Options struct {
	// Cloud is Cloudscale or Exoscale.
	Cloud string
	// Env holds the cloud's API address and credentials: CloudscaleEnv or
	// ExoscaleEnv.
	Env []string
	// Verbosity of its log (klog's -v); default 2, which logs every Node
	// it initializes and deletes.
	Verbosity int
}

// ProcessName is the CCM's name among the control plane's processes: its
// log is <Dir>/cloud-controller-manager.log, and the field manager of its
// writes (the user agent's program name) is the same.
const ProcessName = "cloud-controller-manager"

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
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Started through a link named as the CCM: a client's default user
	// agent, and so the field manager of every write it makes and the
	// audit log's userAgent, is its program's name. The CCM's writes to a
	// Node then say they are its own, not the test's or the demo's.
	link := filepath.Join(filepath.Dir(c.Kubeconfig), ProcessName)
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err := os.Symlink(exe, link); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--cloud-provider=" + o.Cloud,
		"--allow-untagged-cloud",
		"--controllers=" + names.CloudNodeController + "," + names.CloudNodeLifecycleController,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=" + strconv.Itoa(o.Verbosity),
	}
	return c.StartProcess(ProcessName, link, args, append([]string{childEnv + "=" + o.Cloud}, o.Env...))
}
