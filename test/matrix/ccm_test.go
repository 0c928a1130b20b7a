package matrix

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	"github.com/appuio/machine-api-provider/pkg/demo"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/localcluster/ccm"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// Every era runs on platform External, as the clusters on both clouds are
// installed: the cloud's CCM (pkg/localcluster/ccm) initializes each Node,
// which the boot simulation registers as a kubelet with
// --cloud-provider=external does; nodelink links a Machine to its Node only
// once the CCM gave the Node its providerID.

// startCCM runs the cloud's CCM as a process of the control plane, talking
// to the emulator with credentials of its own.
func (c *cell) startCCM() {
	env := ccm.CloudscaleEnv(c.emuURL+"/", "matrix-ccm-token")
	if c.cloud == demo.Exoscale {
		env = ccm.ExoscaleEnv(c.emuURL+"/v2", emuexo.DefaultAPIKey, emuexo.DefaultAPISecret, "ch-gva-2")
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := ccm.Start(c.cluster, ccm.Options{Cloud: c.cloud, Env: env, Binary: filepath.Join(bin, ccm.ProcessName)})
	if err != nil {
		c.t.Fatal(err)
	}
	c.ccm = p
}

// ccmExits says how the CCM ended, if it did, for the stays-up check.
func (c *cell) ccmExits() []string {
	if c.ccm == nil {
		return nil
	}
	select {
	case <-c.ccm.Exited():
		return []string{fmt.Sprintf("the %s ended: %v (its log: %s.log)", ccm.ProcessName, c.ccm.Err(), ccm.ProcessName)}
	default:
		return nil
	}
}

// initialized says whether the Node was initialized by the CCM: the
// uninitialized taint gone, its providerID set.
func initialized(ctx context.Context, c client.Client, name string) bool {
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return false
	}
	return n.Spec.ProviderID != "" && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == bootsim.UninitializedTaint.Key })
}
