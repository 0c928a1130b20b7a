package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestManagerConfigThroughTheDeployer sets the manager's flags on a cluster
// as an admin would, through the ConfigMap machine-api-provider-config,
// against a real API server and the deployer with the manager's own flag
// checks: each key reaches the machine-controller's arguments (so the
// controllers roll), a hand edit of the arguments is set back to them, and
// every kind of invalid value is refused with a message naming it while
// the controllers keep the configuration they run with.
func TestManagerConfigThroughTheDeployer(t *testing.T) {
	e := newDeployerEnv(t)
	c, ns, key, ctx := e.c, e.ns, e.key, context.Background()
	e.start(t, checkManagerArgs)
	args, waitArgs := e.args, func(what string, ok func([]string) bool) { t.Helper(); e.waitArgs(t, what, ok) }
	has := func(flags ...string) func([]string) bool {
		return func(a []string) bool {
			for _, f := range flags {
				if !slices.Contains(a, f) {
					return false
				}
			}
			return true
		}
	}
	waitArgs("the controllers Deployment", has("--namespace="+ns))
	base := args()
	if v := deploymentAnnotation(t, c, key); v != "" {
		t.Errorf("annotation %s = %q without a ConfigMap", deployer.ManagerConfigAnnotation, v)
	}

	// The admin's settings: a rate, a duration, a bool and zap's log level.
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: ns},
		Data: map[string]string{
			"cloud-api-qps": "20", "delete-orphans-after": "1h", "capacity-publisher": "false", "zap-log-level": "debug",
		},
	}
	must(t, c.Create(ctx, cm))
	knobs := []string{"--capacity-publisher=false", "--cloud-api-qps=20", "--delete-orphans-after=1h", "--zap-log-level=debug"}
	waitArgs("the ConfigMap's flags", has(knobs...))
	if got := args(); !slices.Equal(got, append(slices.Clone(base), knobs...)) {
		t.Errorf("args %v, want the deployer's %v and then the ConfigMap's, sorted: %v", got, base, knobs)
	}
	waitConfigCondition(t, c, ns, metav1.ConditionTrue, deployer.ReasonConfigApplied, "--capacity-publisher, --cloud-api-qps, --delete-orphans-after, --zap-log-level")
	if got := configGauge(t, deployer.ReasonConfigApplied); got != 1 {
		t.Errorf("machine_api_provider_deployer_condition{condition=ManagerConfigValid,reason=ConfigApplied} = %v, want 1", got)
	}

	// A hand edit of the arguments is set back: the ConfigMap is the place.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			return err
		}
		for i := range d.Spec.Template.Spec.Containers {
			if d.Spec.Template.Spec.Containers[i].Name == deployer.MachineContainer {
				d.Spec.Template.Spec.Containers[i].Args = []string{"--cloud-api-qps=99"}
			}
		}
		return c.Update(ctx, d)
	}))
	waitArgs("the hand edit set back", func(a []string) bool { return has(knobs...)(a) && !slices.Contains(a, "--cloud-api-qps=99") })

	// Every kind of invalid value is refused, naming what is wrong; the
	// controllers keep the flags they run with.
	for _, tc := range []struct {
		data map[string]string
		want string
	}{
		{map[string]string{"create-grace": "10s"}, "--create-grace must be longer than --cloud-api-timeout"},
		{map[string]string{"cloud-api-qps": "fast"}, "--cloud-api-qps takes a number, and the value given is none"},
		{map[string]string{"no-such-flag": "1"}, "--no-such-flag is no flag of the manager"},
		{map[string]string{"delete-orphans-after": "1m"}, "--delete-orphans-after must be 0 (only report orphans) or at least 10m0s"},
		{map[string]string{"max-concurrent-creates": "0"}, "--max-concurrent-creates must be at least 1"},
		{map[string]string{"namespace": "elsewhere"}, `key "namespace": the deployer sets --namespace itself`},
		{map[string]string{"--sync-period": "1m"}, `key "--sync-period": the keys are the flags' names without the leading dashes`},
	} {
		updateConfigMap(t, c, ns, tc.data)
		cond := waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid, tc.want)
		if !strings.Contains(cond.Message, "keeps running with --capacity-publisher, --cloud-api-qps, --delete-orphans-after, --zap-log-level") {
			t.Errorf("%v: the message does not say what stays in force: %s", tc.data, cond.Message)
		}
		if got := args(); !slices.Equal(got, append(slices.Clone(base), knobs...)) {
			t.Errorf("%v refused, yet the manager's args changed: %v", tc.data, got)
		}
		waitConfigMapEvent(t, c, ns, tc.want)
	}
	// A credential pasted under a key the manager does not know is refused
	// by its name alone: its value reaches no condition and no event.
	const pasted = "pasted-api-token-4f1c9e"
	updateConfigMap(t, c, ns, map[string]string{"cloudscale-api-token": pasted, "cloud-api-qps": "25"})
	cond := waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid, "--cloudscale-api-token is no flag of the manager")
	if strings.Contains(cond.Message, pasted) {
		t.Errorf("the condition shows the value of the unknown key: %s", cond.Message)
	}
	waitConfigMapEvent(t, c, ns, "--cloudscale-api-token is no flag of the manager")
	noValueQuoted(t, c, ns, pasted)
	if got := configGauge(t, deployer.ReasonConfigInvalid); got != 0 {
		t.Errorf("machine_api_provider_deployer_condition{condition=ManagerConfigValid,reason=ConfigInvalid} = %v, want 0", got)
	}

	// Fixed: applied, and rolled.
	updateConfigMap(t, c, ns, map[string]string{"cloud-api-qps": "30", "sync-period": "5m"})
	waitArgs("the fixed ConfigMap's flags", func(a []string) bool {
		return slices.Equal(a, append(slices.Clone(base), "--cloud-api-qps=30", "--sync-period=5m"))
	})
	waitConfigCondition(t, c, ns, metav1.ConditionTrue, deployer.ReasonConfigApplied, "--cloud-api-qps, --sync-period")
	if v := deploymentAnnotation(t, c, key); v != `{"cloud-api-qps":"30","sync-period":"5m"}` {
		t.Errorf("annotation %s = %q", deployer.ManagerConfigAnnotation, v)
	}

	// Deleted: the defaults again.
	must(t, c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: ns}}))
	waitArgs("the defaults", func(a []string) bool { return slices.Equal(a, base) })
	waitConfigCondition(t, c, ns, metav1.ConditionTrue, deployer.ReasonConfigApplied, "the manager runs with its defaults")
}

// TestEveryManagerFlagIsAKnob: a flag is either settable through the
// ConfigMap, and then the manager's checks take its default, or reserved
// for the deployer, which then sets it itself; no reserved name is stale.
func TestEveryManagerFlagIsAKnob(t *testing.T) {
	fs := managerCommand().Flags()
	for name := range deployer.ReservedManagerFlags {
		if fs.Lookup(name) == nil {
			t.Errorf("ReservedManagerFlags names %q, which the manager does not have", name)
		}
	}
	d := deployer.Deployment(deployer.Spec{Namespace: "ns", ProviderImage: "p", TokenSecret: "s", Cloud: "exoscale", ClusterID: "c1-x7k2p"})
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name != deployer.MachineContainer {
			continue
		}
		for _, a := range ct.Args {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if _, ok := deployer.ReservedManagerFlags[name]; !ok {
				t.Errorf("the deployer sets --%s, which is not in ReservedManagerFlags: a ConfigMap could set it a second time", name)
			}
		}
		if err := checkManagerArgs(ct.Args); err != nil {
			t.Errorf("the manager refuses the deployer's own arguments %v: %v", ct.Args, err)
		}
	}
}

func updateConfigMap(t *testing.T, c client.Client, ns string, data map[string]string) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: deployer.ManagerConfigMap}, cm); err != nil {
			return err
		}
		cm.Data = data
		return c.Update(context.Background(), cm)
	}))
}

func waitConfigCondition(t *testing.T, c client.Client, ns string, status metav1.ConditionStatus, reason, contains string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	poll(t, fmt.Sprintf("condition %s=%s/%s saying %q", deployer.ConditionManagerConfigValid, status, reason, contains), func() (bool, string) {
		conds, err := deployer.ReadConditions(context.Background(), c, ns)
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(conds, deployer.ConditionManagerConfigValid)
		if cond == nil {
			return false, "no condition"
		}
		got = *cond
		return cond.Status == status && cond.Reason == reason && strings.Contains(cond.Message, contains), fmt.Sprintf("%+v", *cond)
	})
	return got
}

// waitConfigMapEvent waits for a Warning event on the ConfigMap itself,
// where `oc describe configmap` shows it.
func waitConfigMapEvent(t *testing.T, c client.Client, ns, contains string) {
	t.Helper()
	poll(t, "a Warning event on the ConfigMap saying "+contains, func() (bool, string) {
		list := &corev1.EventList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name != deployer.ManagerConfigMap || ev.Reason != deployer.ReasonConfigInvalid {
				continue
			}
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, contains) {
				return true, ""
			}
			seen = append(seen, ev.Message)
		}
		return false, strings.Join(seen, " | ")
	})
}

func deploymentAnnotation(t *testing.T, c client.Client, key types.NamespacedName) string {
	t.Helper()
	d := &appsv1.Deployment{}
	must(t, c.Get(context.Background(), key, d))
	return d.Annotations[deployer.ManagerConfigAnnotation]
}

// configGauge reads machine_api_provider_deployer_condition for the
// ManagerConfigValid condition with the reason; -1 when there is none.
func configGauge(t *testing.T, reason string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	must(t, err)
	for _, f := range families {
		if f.GetName() != "machine_api_provider_deployer_condition" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "condition") == deployer.ConditionManagerConfigValid && label(m, "reason") == reason {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func poll(t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, state := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// deployerEnv is a real API server with what the deployer needs: its
// namespace and the images ConfigMap.
type deployerEnv struct {
	cfg *rest.Config
	c   client.Client
	ns  string
	// key is the controllers' Deployment's.
	key types.NamespacedName
}

func newDeployerEnv(t *testing.T) *deployerEnv {
	t.Helper()
	cfg, c := testenv.Start(t)
	e := &deployerEnv{cfg: cfg, c: c, ns: "openshift-machine-api"}
	e.key = types.NamespacedName{Namespace: e.ns, Name: deployer.DeploymentName("")}
	ctx := context.Background()
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: e.ns},
		Data:       map[string]string{deployer.ImagesKey: `{"machineAPIOperator": "mao:1", "kubeRBACProxy": "proxy:1"}`},
	}))
	return e
}

// start runs a deployer that checks the manager's flags with check, until
// the returned stop or the test's end.
func (e *deployerEnv) start(t *testing.T, check func([]string) error) (stop func()) {
	t.Helper()
	return e.startWith(t, check, nil)
}

// startWith is start with the deployer's options changed by edit.
func (e *deployerEnv) startWith(t *testing.T, check func([]string) error, edit func(*deployer.ManagerOptions)) (stop func()) {
	t.Helper()
	o := deployer.ManagerOptions{
		Options:                deployer.Options{Namespace: e.ns, ProviderImage: "provider:1", CheckManagerArgs: check, ClusterID: "config-test-x7k2p"},
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		Log:                    log.Log,
		AllowManyPerProcess:    true,
	}
	if edit != nil {
		edit(&o)
	}
	mgr, err := deployer.NewManager(e.cfg, o)
	must(t, err)
	return testenv.Run(t, mgr)
}

// args are the machine-controller's arguments, nil without the
// Deployment.
func (e *deployerEnv) args() []string {
	d := &appsv1.Deployment{}
	if err := e.c.Get(context.Background(), e.key, d); err != nil {
		return nil
	}
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name == deployer.MachineContainer {
			return ct.Args
		}
	}
	return nil
}

func (e *deployerEnv) waitArgs(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	poll(t, what, func() (bool, string) { a := e.args(); return ok(a), fmt.Sprint(a) })
}
