package demo

import (
	"fmt"
	"path/filepath"
	"slices"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/appuio/machine-api-provider/pkg/localcluster"
	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm"
)

// Platforms are the platforms the local cluster can say it runs on
// (Options.Platform), the default first: External with an external
// cloud-controller-manager, as APPUiO installs new clusters on both clouds
// (and converts older ones), and None, the clusters installed before.
var Platforms = []configv1.PlatformType{configv1.ExternalPlatformType, configv1.NonePlatformType}

// CheckPlatform says whether p is one of Platforms.
func CheckPlatform(p configv1.PlatformType) error {
	if !slices.Contains(Platforms, p) {
		return fmt.Errorf("no platform %q: the local cluster runs on %s or %s", p, Platforms[0], Platforms[1])
	}
	return nil
}

// External says whether the cluster is on platform External with an
// external CCM: Nodes register uninitialized and the CCM initializes them.
func (o Options) External() bool { return o.Platform == configv1.ExternalPlatformType }

// platformSpec and platformStatus are the Infrastructure's: on External, the
// CCM state External, as the installer writes it for
// platform.external.cloudControllerManager: External.
func (o Options) platformSpec() configv1.PlatformSpec {
	if !o.External() {
		return configv1.PlatformSpec{Type: configv1.NonePlatformType}
	}
	return configv1.PlatformSpec{Type: configv1.ExternalPlatformType, External: &configv1.ExternalPlatformSpec{PlatformName: o.Cloud}}
}

func (o Options) platformStatus() *configv1.PlatformStatus {
	if !o.External() {
		return &configv1.PlatformStatus{Type: configv1.NonePlatformType}
	}
	return &configv1.PlatformStatus{Type: configv1.ExternalPlatformType, External: &configv1.ExternalPlatformStatus{
		CloudControllerManager: configv1.CloudControllerManagerStatus{State: configv1.CloudControllerManagerExternal},
	}}
}

// startCCM runs the cloud's CCM as a process of the control plane, talking
// to the emulator at baseURL with credentials of its own kind (the
// emulator takes any).
func (e *Env) startCCM(baseURL string) error {
	var env []string
	switch e.Options.Cloud {
	case Exoscale:
		env = ccm.ExoscaleEnv(baseURL+"v2", e.cloud.ccmKey, e.cloud.ccmSecret, e.cloud.zone)
	default:
		env = ccm.CloudscaleEnv(baseURL, e.cloud.ccmKey)
	}
	p, err := ccm.Start(e.Cluster, ccm.Options{Cloud: e.Options.Cloud, Env: env, Binary: filepath.Join(e.Options.BinDir, ccm.ProcessName)})
	e.ccm = p
	return err
}

// CCM is the running cloud-controller-manager process, nil on platform None.
func (e *Env) CCM() *localcluster.Process { return e.ccm }

// ccmFailed says that the CCM ended, and how; nil while it runs (or on
// platform None).
func (e *Env) ccmFailed() error {
	if e.ccm == nil {
		return nil
	}
	select {
	case <-e.ccm.Exited():
		return fmt.Errorf("the cloud-controller-manager ended (%v); its log is %s", e.ccm.Err(), filepath.Join(e.Options.Dir, ccm.ProcessName+".log"))
	default:
		return nil
	}
}
