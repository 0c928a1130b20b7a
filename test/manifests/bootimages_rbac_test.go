package manifests_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	bootimagesctl "github.com/appuio/machine-api-provider/pkg/controllers/bootimages"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestBootImagesWithTheirRBAC runs the manager with the boot image
// controller on, as each install's controllers' service account: it reads
// the release's ConfigMap in openshift-machine-config-operator (the Role
// there), imports from the test's mirror into the emulator, moves a
// following MachineSet and records the skew in MachineConfiguration
// cluster, and the API server refuses none of its requests.
func TestBootImagesWithTheirRBAC(t *testing.T) {
	for _, k := range installs {
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) { bootImagesWithTheirRBAC(t, k) })
	}
}

func bootImagesWithTheirRBAC(t *testing.T, dir string) {
	cfg, c, a, objs := setup(t, dir, testenv.WithCRDs(testenv.MachineConfigurationCRD(t)))
	l := captureLogs(t)
	ctx := context.Background()
	sa := controllersSA(t, objs)
	emu := emulate(t, cloudOf(t, objs))
	for name, data := range emu.secrets {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, StringData: data}); err != nil {
			t.Fatal(err)
		}
	}
	cm, files, err := bootimages.FakeRelease{Version: "4.22.1", RHCOS: map[string]string{"rhel-9": "9.6.20260101-0"}}.Build("https://rhcos.example/art")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, bootimages.NewMachineConfiguration()); err != nil {
		t.Fatal(err)
	}
	mirror := imagefetch.NewServer("", files)
	t.Cleanup(mirror.Close)

	const cluster = "rbac-test-x1y2z"
	provider, err := manager.New(impersonate(cfg, sa), manager.Options{
		Cloud: emu.cloud, ClusterID: cluster, Namespace: Namespace,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", LeaderElection: true,
		Log: l.logger(), AllowManyPerProcess: true,
		BootImages: bootimagesctl.Options{Options: bootimages.Options{Mirror: mirror.URL}, RecordSkew: true, Interval: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, provider)

	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": cluster, "machine.openshift.io/cluster-api-machineset": "workers"}
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: Namespace, Labels: map[string]string{
			"machine.openshift.io/cluster-api-cluster": cluster, bootimages.FollowLabel: "true"}},
		Spec: machinev1.MachineSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: labels}},
		},
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(emu.spec)}
	if err := c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	name := bootimages.BootImageName("9.6.20260101-0", "rhel-9", "amd64", cluster)
	eventually(t, 2*time.Minute, "the MachineSet on the imported image", func() (bool, error) {
		if err := c.Get(ctx, key(ms.Name), ms); err != nil {
			return false, err
		}
		ref, _, err := emu.cloud.(cloud.ImageCloud).SpecImageRef(ms.Spec.Template.Spec.ProviderSpec)
		return strings.Contains(ref, name), fmt.Errorf("boots %q, err %v, conditions %v", ref, err, ms.Status.Conditions)
	})
	eventually(t, time.Minute, "the skew record", func() (bool, error) {
		mc := &operatorv1.MachineConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: "cluster"}, mc); err != nil {
			return false, err
		}
		return mc.Spec.BootImageSkewEnforcement.Manual.RHCOSVersion == "9.6.20260101-0", fmt.Errorf("record %+v", mc.Spec.BootImageSkewEnforcement)
	})
	checkAudit(t, a, sa, objs)
	var read bool
	for _, r := range a.requests(t, sa) {
		if r.resource == "configmaps" && r.namespace == bootimages.Namespace && r.verb == "get" && r.code == 200 {
			read = true
		}
	}
	if !read {
		t.Errorf("%s never read the ConfigMap %s/%s", sa, bootimages.Namespace, bootimages.ConfigMapName)
	}
}
