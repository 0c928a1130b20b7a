package clouds

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm"
)

func init() {
	cloudprovider.RegisterCloudProvider(ccm.Cloudscale, newCloudscale)
	cloudprovider.RegisterCloudProvider(ccm.Exoscale, newExoscale)
}

// Main runs the CCM with the command line args (without the program's
// name), as the vendors' main functions do, and returns the exit code. The
// cloud is --cloud-provider's (the vendors' binaries set their own).
func Main(args []string) int {
	o, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		fmt.Fprintf(os.Stderr, "unable to initialize command options: %v\n", err)
		return 1
	}
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
