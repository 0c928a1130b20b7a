package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
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
	e := newDeployerEnv(t)
	c, ns, key, ctx := e.c, e.ns, e.key, context.Background()
	// The old release's manager knew --webhook-port.
	const dropped = "--webhook-port="
	oldCheck := func(args []string) error {
		return checkManagerArgs(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, dropped) }))
	}
	args, waitArgs := e.args, func(what string, ok func([]string) bool) { t.Helper(); e.waitArgs(t, what, ok) }

	stopOld := e.start(t, oldCheck)
	waitArgs("the controllers Deployment", func(a []string) bool { return slices.Contains(a, "--namespace="+ns) })
	base := args()
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: ns},
		Data:       map[string]string{"webhook-port": "9443", "cloud-api-qps": "20"},
	}))
	waitArgs("the old release's flags", func(a []string) bool { return slices.Contains(a, "--webhook-port=9443") })
	stopOld()

	// The new release's deployer: its manager has no --webhook-port.
	e.start(t, checkManagerArgs)
	waitArgs("the defaults", func(a []string) bool { return slices.Equal(a, base) })
	cond := waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid, "runs with its defaults")
	for _, want := range []string{"--webhook-port is no flag of the manager", "no longer pass"} {
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
	waitConfigCondition(t, c, ns, metav1.ConditionTrue, deployer.ReasonConfigApplied, "--cloud-api-qps")
}
