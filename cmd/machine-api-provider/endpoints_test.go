package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// TestEndpointsComeOnlyFromTheDeployer: whoever may write the ConfigMap
// machine-api-provider-config may not choose where the manager sends its
// default credentials and every create's user data. A cluster whose
// ConfigMap set cloudscale-api-url and exoscale-api-endpoint, and whose
// controllers an earlier release rolled out with them: the deployer refuses
// the ConfigMap naming the key, rolls the manager out without the
// endpoints (with the ConfigMap's other flags it ran with, and with the
// endpoint the deployer's own --cloudscale-api-url names, as its flag), and the
// condition and a Warning event on the ConfigMap say so, quoting no value.
func TestEndpointsComeOnlyFromTheDeployer(t *testing.T) {
	e := newDeployerEnv(t)
	c, ns, key, ctx := e.c, e.ns, e.key, context.Background()
	const (
		attacker = "http://attacker-5c1f0b.example/"
		own      = "http://emulator.test:8282/"
	)
	knobs := map[string]string{"cloud-api-qps": "20", "cloudscale-api-url": attacker, "exoscale-api-endpoint": attacker + "v2"}
	must(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: ns}, Data: knobs}))
	// The controllers as an earlier release rolled them out: with the
	// ConfigMap's flags, endpoints included, recorded on the Deployment.
	old := deployer.Deployment(deployer.Spec{Namespace: ns, ProviderImage: "provider:0", TokenSecret: "cloudscale-token",
		ServiceAccount: "machine-api-controllers", ClusterID: "config-test-x7k2p", ManagerConfig: knobs,
		Images: deployer.Images{MachineAPIOperator: "mao:0", KubeRBACProxy: "proxy:0"}})
	must(t, c.Create(ctx, old))
	if a := managerArgsOf(old); !slices.Contains(a, "--cloudscale-api-url="+attacker) {
		t.Fatalf("the earlier release's args %v lack the ConfigMap's endpoint", a)
	}

	e.startWith(t, checkManagerArgs, func(o *deployer.ManagerOptions) { o.Own = map[string]string{"cloudscale-api-url": own} })
	e.waitArgs(t, "the manager with the deployer's endpoint alone", func(a []string) bool {
		return slices.Contains(a, "--cloud-api-qps=20") && slices.Contains(a, "--cloudscale-api-url="+own) &&
			!slices.ContainsFunc(a, func(s string) bool { return strings.Contains(s, "attacker") || strings.Contains(s, "api-endpoint") })
	})
	d := &appsv1.Deployment{}
	must(t, c.Get(ctx, key, d))
	noneCarries(t, d, "attacker")
	if v := d.Annotations[deployer.ManagerConfigAnnotation]; v != `{"cloud-api-qps":"20"}` {
		t.Errorf("annotation %s = %s, want only cloud-api-qps", deployer.ManagerConfigAnnotation, v)
	}
	cond := waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid, `key "cloudscale-api-url": the deployer sets --cloudscale-api-url itself`)
	for _, want := range []string{"keeps running with --cloud-api-qps",
		"the manager calls the cloudscale.ch API at the one the deployer's --cloudscale-api-url names, never the ConfigMap's cloudscale-api-url",
		"the manager calls the Exoscale API at the real one (the deployer's --exoscale-api-endpoint names no other), never the ConfigMap's exoscale-api-endpoint"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("the condition does not say %q: %s", want, cond.Message)
		}
	}
	// The roll-out without the endpoints it ran with is an event of its
	// own.
	waitConfigMapEvent(t, c, ns, "without --cloudscale-api-url, --exoscale-api-endpoint, which it ran with before")
	noValueQuoted(t, c, ns, "attacker", "=20")
}

// noValueQuoted fails when a value of the ConfigMap (each of values) is in
// the deployer's conditions or in an event of the namespace. Each
// condition's event on the status ConfigMap is recorded after the condition
// is written: it waits up to 10s for them first, or the events that could
// quote a value would not be looked at. (The recorder may drop events of an
// object that had many; one that never comes quotes nothing.)
func noValueQuoted(t *testing.T, c client.Client, ns string, values ...string) {
	t.Helper()
	conds, err := deployer.ReadConditions(context.Background(), c, ns)
	must(t, err)
	events := &corev1.EventList{}
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		must(t, c.List(context.Background(), events, client.InNamespace(ns)))
		missing = missing[:0]
		for _, cond := range conds {
			if !slices.ContainsFunc(events.Items, func(ev corev1.Event) bool {
				return ev.InvolvedObject.Name == deployer.StatusConfigMap && ev.Reason == cond.Reason && strings.Contains(ev.Message, cond.Message)
			}) {
				missing = append(missing, cond.Type)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		t.Logf("no event of the conditions %v within 10s; checking the events there are", missing)
	}
	for _, v := range values {
		for _, cond := range conds {
			if strings.Contains(cond.Message, v) {
				t.Errorf("condition %s quotes the ConfigMap's value %q: %s", cond.Type, v, cond.Message)
			}
		}
		for _, ev := range events.Items {
			if strings.Contains(ev.Message, v) {
				t.Errorf("event %s on %s quotes the ConfigMap's value %q: %s", ev.Reason, ev.InvolvedObject.Name, v, ev.Message)
			}
		}
	}
}

// noneCarries fails when an argument or the environment of a container
// of d holds value.
func noneCarries(t *testing.T, d *appsv1.Deployment, value string) {
	t.Helper()
	for _, ct := range d.Spec.Template.Spec.Containers {
		for _, a := range ct.Args {
			if strings.Contains(a, value) {
				t.Errorf("%s: argument %s: the ConfigMap's value", ct.Name, a)
			}
		}
		for _, env := range ct.Env {
			if strings.Contains(env.Value, value) {
				t.Errorf("%s: environment %s=%s: the ConfigMap's value", ct.Name, env.Name, env.Value)
			}
		}
	}
}

func managerArgsOf(d *appsv1.Deployment) []string {
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name == deployer.MachineContainer {
			return ct.Args
		}
	}
	return nil
}
