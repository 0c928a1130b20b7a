package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
)

// TestBootImagesMirrorComesOnlyFromTheDeployer: whoever may write the
// ConfigMap machine-api-provider-config may not choose what the cluster's
// new nodes boot. On Exoscale the boot image controller takes the image's
// MD5 from the mirror itself, so the mirror's writer chooses the image. A
// cluster whose ConfigMap set boot-images-mirror (beside a knob that stays
// one, boot-images-follow-all), and whose controllers ran with it: the
// deployer refuses the ConfigMap naming the key, rolls the manager out
// without that mirror (the knob kept) and says the controller is off;
// with the deployer's own --boot-images-mirror the manager gets that one,
// and once the key is gone the ConfigMap applies again. No condition or
// event quotes the ConfigMap's mirror.
func TestBootImagesMirrorComesOnlyFromTheDeployer(t *testing.T) {
	e := newDeployerEnv(t)
	c, ns, ctx := e.c, e.ns, context.Background()
	const (
		attacker = "http://attacker-9d3e1a.example/rhcos"
		own      = "https://objects.rma.cloudscale.ch/rhcos"
	)
	knobs := map[string]string{"boot-images-follow-all": "true", "boot-images-mirror": attacker}
	must(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deployer.ManagerConfigMap, Namespace: ns}, Data: knobs}))
	// The controllers as the release that made the mirror a key rolled
	// them out: with the ConfigMap's flags, recorded on the Deployment.
	must(t, c.Create(ctx, deployer.Deployment(deployer.Spec{Namespace: ns, ProviderImage: "provider:0", TokenSecret: "cloudscale-token",
		ServiceAccount: "machine-api-controllers", ClusterID: "config-test-x7k2p", ManagerConfig: knobs,
		Images: deployer.Images{MachineAPIOperator: "mao:0", KubeRBACProxy: "proxy:0"}})))
	mirrors := func(a []string) []string {
		return slices.DeleteFunc(slices.Clone(a), func(s string) bool { return !strings.HasPrefix(s, "--boot-images-mirror=") })
	}

	// The deployer without a mirror of its own: the controller is off.
	stop := e.start(t, checkManagerArgs)
	e.waitArgs(t, "the manager without the ConfigMap's mirror", func(a []string) bool {
		return slices.Contains(a, "--boot-images-follow-all=true") && len(mirrors(a)) == 0
	})
	cond := waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid, `key "boot-images-mirror": the deployer sets --boot-images-mirror itself`)
	for _, want := range []string{"keeps running with --boot-images-follow-all",
		"the boot image controller stays off (the deployer's --boot-images-mirror names no mirror), whatever the ConfigMap's boot-images-mirror says"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("the condition does not say %q: %s", want, cond.Message)
		}
	}
	waitConfigMapEvent(t, c, ns, "without --boot-images-mirror, which it ran with before")
	stop()

	// The deployer's own option: the manager imports from its mirror
	// alone, and the condition says so while the key is there.
	e.startWith(t, checkManagerArgs, func(o *deployer.ManagerOptions) { o.Own = map[string]string{"boot-images-mirror": own} })
	e.waitArgs(t, "the manager with the deployer's mirror", func(a []string) bool {
		return slices.Contains(a, "--boot-images-follow-all=true") && slices.Equal(mirrors(a), []string{"--boot-images-mirror=" + own})
	})
	waitConfigCondition(t, c, ns, metav1.ConditionFalse, deployer.ReasonConfigInvalid,
		"the boot image controller imports from the mirror the deployer's --boot-images-mirror names, never from the ConfigMap's boot-images-mirror")
	if err := checkManagerArgs(e.args()); err != nil {
		t.Errorf("the manager refuses the arguments it is rolled out with: %v", err)
	}

	// The key removed: the ConfigMap applies, the mirror stays the
	// deployer's.
	updateConfigMap(t, c, ns, map[string]string{"boot-images-follow-all": "true"})
	waitConfigCondition(t, c, ns, metav1.ConditionTrue, deployer.ReasonConfigApplied, "--boot-images-follow-all")
	e.waitArgs(t, "the deployer's mirror and the ConfigMap's knob", func(a []string) bool {
		return slices.Contains(a, "--boot-images-follow-all=true") && slices.Equal(mirrors(a), []string{"--boot-images-mirror=" + own})
	})
	d := &appsv1.Deployment{}
	must(t, c.Get(ctx, e.key, d))
	noneCarries(t, d, "attacker")
	noValueQuoted(t, c, ns, "attacker")
}

// TestOwnFlagsAreTheDeployersOptions: each option the deployer hands the
// manager (deployer.OwnFlags) is a flag of the deployer defaulting to its
// environment variable, a flag of the manager, reserved, and rendered as
// the manager's flag; a mirror the manager would refuse stops the deployer
// at its start.
func TestOwnFlagsAreTheDeployersOptions(t *testing.T) {
	for _, of := range deployer.OwnFlags {
		v := "https://" + strings.ToLower(of.Env) + ".example/"
		t.Setenv(of.Env, v)
		if f := deployerCommand().Flags().Lookup(of.Name); f == nil || f.DefValue != v {
			t.Errorf("the deployer's --%s: %+v, want the default $%s", of.Name, f, of.Env)
		}
		if managerCommand().Flags().Lookup(of.Name) == nil {
			t.Errorf("--%s is no flag of the manager", of.Name)
		}
		if _, ok := deployer.ReservedManagerFlags[of.Name]; !ok {
			t.Errorf("--%s is not reserved: a ConfigMap could set it", of.Name)
		}
		d := deployer.Deployment(deployer.Spec{Namespace: "ns", ProviderImage: "p", ClusterID: "c1-x7k2p", Own: map[string]string{of.Name: v}})
		if a := managerArgsOf(d); !slices.Contains(a, "--"+of.Name+"="+v) {
			t.Errorf("the deployer's --%s is not handed on: %v", of.Name, a)
		} else if err := checkManagerArgs(a); err != nil {
			t.Errorf("the manager refuses %v: %v", a, err)
		}
	}
	cmd := deployerCommand()
	cmd.SetArgs([]string{"--provider-image=p", "--boot-images-mirror=https://user:secret@mirror.example/rhcos"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--boot-images-mirror: want an http or https URL without credentials") {
		t.Errorf("the deployer with a mirror the manager refuses: %v", err)
	}
}
