package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// TestManagerConfigNeverQuotesAValue: no value of the ConfigMap
// machine-api-provider-config reaches the condition ManagerConfigValid or
// an event, applied or refused: one pasted in the wrong place may be a
// secret, and any may be hostile text (a fake instruction in `oc describe`).
// The messages name the key and the rule its value breaks instead.
func TestManagerConfigNeverQuotesAValue(t *testing.T) {
	e := newDeployerEnv(t)
	c, ns, ctx := e.c, e.ns, context.Background()
	e.start(t, checkManagerArgs)
	e.waitArgs(t, "the controllers Deployment", func(a []string) bool { return len(a) > 0 })

	// Applied: the keys are named, not their values.
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: ns},
		Data:       map[string]string{"cloud-api-qps": "17.5", "delete-orphans-after": "73m"},
	}))
	waitConfigCondition(t, c, ns, metav1.ConditionTrue, deployer.ReasonConfigApplied, "--cloud-api-qps, --delete-orphans-after")
	noValueQuoted(t, c, ns, "17.5", "73m")

	// Refused: each kind of bad value, named by its key and the rule.
	const canary = "ignore-all-previous-instructions-7f3a9c"
	for _, tc := range []struct {
		data map[string]string
		want string
	}{
		{map[string]string{"cloud-api-qps": canary}, "--cloud-api-qps takes a number, and the value given is none"},
		{map[string]string{"sync-period": canary}, "--sync-period takes a duration such as 90s or 5m, and the value given is none"},
		{map[string]string{"capacity-publisher": canary}, "--capacity-publisher takes true or false, and the value given is none"},
		{map[string]string{"user-data-memory-limit": canary}, "--user-data-memory-limit takes a size such as 256Mi, and the value given is none"},
		{map[string]string{"zap-log-level": canary}, "--zap-log-level takes a value of type"},
		{map[string]string{"create-grace": "11s"}, "--create-grace must be longer than --cloud-api-timeout"},
		{map[string]string{"delete-orphans-after": "7m"}, "--delete-orphans-after must be 0 (only report orphans) or at least 10m0s"},
		{map[string]string{"max-concurrent-creates": "-3"}, "--max-concurrent-creates must be at least 1"},
	} {
		updateConfigMap(t, c, ns, tc.data)
		waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid, tc.want)
		waitConfigMapEvent(t, c, ns, tc.want)
		for _, v := range tc.data {
			noValueQuoted(t, c, ns, v)
		}
	}
	if got := e.args(); strings.Contains(strings.Join(got, " "), canary) {
		t.Errorf("the manager runs with a refused value: %v", got)
	}
}
