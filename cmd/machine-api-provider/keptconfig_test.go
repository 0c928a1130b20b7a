package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestKeptConfigIsCheckedLikeNewConfig: an upgrade whose manager dropped a
// flag the ConfigMap still sets. The old release's deployer applied the
// ConfigMap's flags and recorded them on the Deployment; the new one
// refuses the ConfigMap, and the recorded flags fail the same check, so it
// does not keep them (the new manager would not start, while the status
// said Deployed): it rolls the manager out with its defaults, and the
// condition ManagerConfigValid says so. Once the ConfigMap is fixed, its
// flags apply again.
func TestKeptConfigIsCheckedLikeNewConfig(t *testing.T) {
	cfg, c := testenv.Start(t)
	ctx := context.Background()
	const ns = "openshift-machine-api"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: ns},
		Data:       map[string]string{deployer.ImagesKey: `{"machineAPIOperator": "mao:1", "kubeRBACProxy": "proxy:1"}`},
	}))
	// The old release's manager knew --webhook-port.
	const dropped = "--webhook-port="
	oldCheck := func(args []string) error {
		return checkManagerArgs(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, dropped) }))
	}
	start := func(check func([]string) error) func() {
		mgr, err := deployer.NewManager(cfg, deployer.ManagerOptions{
			Options:                deployer.Options{Namespace: ns, ProviderImage: "provider:1", CheckManagerArgs: check},
			MetricsBindAddress:     "0",
			HealthProbeBindAddress: "0",
			Log:                    log.Log,
			AllowManyPerProcess:    true,
		})
		must(t, err)
		return testenv.Run(t, mgr)
	}
	key := types.NamespacedName{Namespace: ns, Name: deployer.DeploymentName("")}
	args := func() []string {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			return nil
		}
		for _, ct := range d.Spec.Template.Spec.Containers {
			if ct.Name == deployer.MachineContainer {
				return ct.Args
			}
		}
		return nil
	}
	waitArgs := func(what string, ok func([]string) bool) {
		t.Helper()
		poll(t, what, func() (bool, string) { a := args(); return ok(a), fmt.Sprint(a) })
	}

	stopOld := start(oldCheck)
	waitArgs("the controllers Deployment", func(a []string) bool { return slices.Contains(a, "--namespace="+ns) })
	base := args()
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: ns},
		Data:       map[string]string{"webhook-port": "9443", "cloud-api-qps": "20"},
	}))
	waitArgs("the old release's flags", func(a []string) bool { return slices.Contains(a, "--webhook-port=9443") })
	stopOld()

	// The new release's deployer: its manager has no --webhook-port.
	start(checkManagerArgs)
	waitArgs("the defaults", func(a []string) bool { return slices.Equal(a, base) })
	cond := waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid, "runs with its defaults")
	for _, want := range []string{"unknown flag: --webhook-port", "no longer pass"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("the condition does not say %q: %s", want, cond.Message)
		}
	}
	if err := checkManagerArgs(args()); err != nil {
		t.Errorf("the manager's args do not pass its own checks: %v", err)
	}
	if v := deploymentAnnotation(t, c, key); v != "" {
		t.Errorf("annotation %s = %q, want none: the manager runs with its defaults", deployer.ManagerConfigAnnotation, v)
	}

	// Fixed: the ConfigMap's flags apply again.
	updateConfigMap(t, c, ns, map[string]string{"cloud-api-qps": "20"})
	waitArgs("the fixed ConfigMap's flags", func(a []string) bool { return slices.Equal(a, append(slices.Clone(base), "--cloud-api-qps=20")) })
	waitConfigCondition(t, c, ns, metav1.ConditionTrue, deployer.ReasonConfigApplied, "cloud-api-qps=20")
}
