package deployer_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// A proxy URL with credentials: they must never show in a status or event.
const (
	proxyPassword = "s3cret-proxy-password"
	proxyURL1     = "http://user:" + proxyPassword + "@proxy1.example:3128"
	proxyURL2     = "http://proxy2.example:3128"
	noProxy       = ".cluster.local,.svc,172.30.0.0/16,10.128.0.0/14,api-int.c1.example"
	bundle1       = "-----BEGIN CERTIFICATE-----\nMIIBbundle1\n-----END CERTIFICATE-----\n"
	bundle2       = "-----BEGIN CERTIFICATE-----\nMIIBbundle2\n-----END CERTIFICATE-----\n"
	// injector is the field manager standing in for the network
	// operator's trusted CA injector, which updates the ConfigMap.
	injector = "cluster-network-operator"
)

var proxyEnvNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

// TestClusterProxy runs the deployer on an API server that serves
// config.openshift.io Proxies (the CRD of the openshift/api module), as
// OpenShift does: the Proxy's status reaches the machine-controller's
// environment and a change rolls it, as does a change of the injected trust
// bundle.
func TestClusterProxy(t *testing.T) {
	cfg, pc := startOpenShift(t, testenv.ProxyCRD(t))

	t.Run("ProxyRollsTheProvider", func(t *testing.T) {
		// The Proxy exists before the deployer starts, as after an
		// install with a proxy. Its spec differs from its status: the
		// status is what the network operator validated and completed.
		p := &configv1.Proxy{
			ObjectMeta: metav1.ObjectMeta{Name: deployer.ClusterProxyName},
			Spec:       configv1.ProxySpec{HTTPProxy: "http://not-yet-validated.example:1", NoProxy: "example.com"},
		}
		if err := pc.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Delete(t.Context(), p) })
		setProxyStatus(t, pc, configv1.ProxyStatus{HTTPProxy: proxyURL1, HTTPSProxy: proxyURL1, NoProxy: noProxy})

		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		first := e.waitDeployment(func(d *appsv1.Deployment) bool {
			return proxyEnv(d)["HTTPS_PROXY"] == proxyURL1
		})
		if got, want := proxyEnv(first), map[string]string{"HTTP_PROXY": proxyURL1, "HTTPS_PROXY": proxyURL1, "NO_PROXY": noProxy}; !maps.Equal(got, want) {
			t.Errorf("machine-controller proxy environment %v, want %v (the Proxy's status)", got, want)
		}
		for _, c := range first.Spec.Template.Spec.Containers {
			if c.Name == deployer.MachineContainer {
				continue
			}
			for _, ev := range c.Env {
				if slices.Contains(proxyEnvNames, ev.Name) {
					t.Errorf("%s has %s: only the machine-controller calls out of the cluster", c.Name, ev.Name)
				}
			}
		}
		cond := e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)
		if !strings.Contains(cond.Message, "HTTPS_PROXY") {
			t.Errorf("condition message %q does not say that a proxy is set", cond.Message)
		}

		// The network operator validates a new proxy: the pods roll.
		setProxyStatus(t, pc, configv1.ProxyStatus{HTTPSProxy: proxyURL2, NoProxy: noProxy})
		changed := e.waitDeployment(func(d *appsv1.Deployment) bool {
			return proxyEnv(d)["HTTPS_PROXY"] == proxyURL2
		})
		if got, want := proxyEnv(changed), map[string]string{"HTTPS_PROXY": proxyURL2, "NO_PROXY": noProxy}; !maps.Equal(got, want) {
			t.Errorf("after the change: proxy environment %v, want %v", got, want)
		}
		if changed.UID != first.UID || changed.Generation <= first.Generation {
			t.Errorf("Deployment UID %s -> %s, generation %d -> %d: want the same Deployment with a new pod template",
				first.UID, changed.UID, first.Generation, changed.Generation)
		}

		// The proxy is removed (the status emptied): no variable left.
		setProxyStatus(t, pc, configv1.ProxyStatus{})
		e.waitDeployment(func(d *appsv1.Deployment) bool { return len(proxyEnv(d)) == 0 })
		e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)

		// Set again, then the Proxy itself deleted.
		setProxyStatus(t, pc, configv1.ProxyStatus{HTTPProxy: proxyURL2})
		e.waitDeployment(func(d *appsv1.Deployment) bool { return proxyEnv(d)["HTTP_PROXY"] == proxyURL2 })
		if err := pc.Delete(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		e.waitDeployment(func(d *appsv1.Deployment) bool { return len(proxyEnv(d)) == 0 })

		// The proxy's credentials are in no status and no event.
		if raw := e.statusConfigMap().Data[deployer.StatusKey]; strings.Contains(raw, proxyPassword) || strings.Contains(raw, "proxy1.example") {
			t.Errorf("the status names the proxy: %s", raw)
		}
		events := &corev1.EventList{}
		e.must(e.c.List(e.ctx, events, client.InNamespace(e.ns)))
		for _, ev := range events.Items {
			if strings.Contains(ev.Message, proxyPassword) {
				t.Errorf("event %s names the proxy's password: %s", ev.Reason, ev.Message)
			}
		}
	})

	t.Run("TrustedCABundleRolls", func(t *testing.T) {
		e := start(t, cfg)
		e.createImages(maoImg1, proxyImg1)
		before := e.waitDeployment(func(*appsv1.Deployment) bool { return true })
		if h, ok := before.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation]; ok {
			t.Errorf("trusted CA hash %q before anything was injected", h)
		}
		cm := e.waitTrustedCA()

		// The network operator injects the bundle (an update, its own
		// field manager): the pods roll.
		e.inject(cm, bundle1)
		injected := e.waitDeployment(func(d *appsv1.Deployment) bool {
			return d.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation] == deployer.HashTrustedCA(bundle1)
		})
		if injected.Generation <= before.Generation {
			t.Errorf("generation %d -> %d: the pod template did not change", before.Generation, injected.Generation)
		}
		e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)

		// A new bundle (a user CA added to the Proxy's trustedCA).
		e.inject(e.waitTrustedCA(), bundle2)
		e.waitDeployment(func(d *appsv1.Deployment) bool {
			return d.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation] == deployer.HashTrustedCA(bundle2)
		})

		// Other reconciles (an upgrade's new images) leave the ConfigMap
		// alone: no write, the injector's data kept, no field of it
		// claimed.
		cm = e.waitTrustedCA()
		rv := cm.ResourceVersion
		setImages(e, maoImg2, proxyImg2)
		upgraded := e.waitDeployment(func(d *appsv1.Deployment) bool { return image(d, "machineset-controller") == maoImg2 })
		if h := upgraded.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation]; h != deployer.HashTrustedCA(bundle2) {
			t.Errorf("trusted CA hash after the upgrade %q, want bundle2's", h)
		}
		cm = e.waitTrustedCA()
		if cm.ResourceVersion != rv || cm.Data[deployer.TrustedCAKey] != bundle2 {
			t.Errorf("the ConfigMap was written (resourceVersion %s -> %s) or lost the bundle: %v", rv, cm.ResourceVersion, cm.Data)
		}
		for _, mf := range cm.ManagedFields {
			if mf.Manager == deployer.ManagedByValue && strings.Contains(string(mf.FieldsV1.Raw), `"f:data"`) {
				t.Errorf("the deployer claims the ConfigMap's data: %s", mf.FieldsV1.Raw)
			}
		}

		// Deleted: applied again, empty until injected again, and the pods
		// lose the bundle meanwhile.
		e.must(e.c.Delete(e.ctx, cm))
		e.poll("the trusted CA ConfigMap recreated", func() (bool, string) {
			got := &corev1.ConfigMap{}
			err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: deployer.TrustedCAConfigMap}, got)
			if err != nil {
				return false, err.Error()
			}
			return got.UID != cm.UID, "the old one"
		})
		e.waitTrustedCA()
		e.waitDeployment(func(d *appsv1.Deployment) bool {
			_, ok := d.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation]
			return !ok
		})
	})
}

// testPlainCluster: on an API server without the Proxy API (a plain
// Kubernetes, config/default) the deployer deploys without a proxy, still
// applies the trusted CA ConfigMap (no one injects into it), and rolls the
// pods for a bundle put into it by hand.
func testPlainCluster(t *testing.T, cfg *rest.Config) {
	e := start(t, cfg)
	e.createImages(maoImg1, proxyImg1)
	d := e.waitDeployment(func(*appsv1.Deployment) bool { return true })
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, ev := range c.Env {
			if slices.Contains(proxyEnvNames, ev.Name) {
				t.Errorf("%s has %s without a Proxy API", c.Name, ev.Name)
			}
		}
	}
	if h, ok := d.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation]; ok {
		t.Errorf("trusted CA hash %q without a bundle", h)
	}
	cond := e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied)
	if !strings.Contains(cond.Message, "no cluster-wide proxy") {
		t.Errorf("condition message %q", cond.Message)
	}
	cm := e.waitTrustedCA()
	if len(cm.Data) != 0 {
		t.Errorf("the deployer wrote data into %s: %v", deployer.TrustedCAConfigMap, cm.Data)
	}
	e.inject(cm, bundle1)
	e.waitDeployment(func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation] == deployer.HashTrustedCA(bundle1)
	})
}

// waitTrustedCA waits for the deployer's trusted CA ConfigMap, labelled
// for injection.
func (e *env) waitTrustedCA() *corev1.ConfigMap {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	e.poll("the trusted CA ConfigMap", func() (bool, string) {
		err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: deployer.TrustedCAConfigMap}, cm)
		if err != nil {
			return false, err.Error()
		}
		return cm.Labels[deployer.InjectTrustedCABundleLabel] == "true" && cm.Labels[deployer.ManagedByLabel] == deployer.ManagedByValue,
			fmt.Sprintf("labels %v", cm.Labels)
	})
	return cm
}

// inject writes bundle into cm as the network operator's injector does.
func (e *env) inject(cm *corev1.ConfigMap, bundle string) {
	e.t.Helper()
	err := retryConflict(func() error {
		got := &corev1.ConfigMap{}
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(cm), got); err != nil {
			return err
		}
		if got.Data == nil {
			got.Data = map[string]string{}
		}
		got.Data[deployer.TrustedCAKey] = bundle
		return e.c.Update(e.ctx, got, client.FieldOwner(injector))
	})
	e.must(err)
}

func setImages(e *env, mao, proxy string) {
	e.t.Helper()
	e.must(retryConflict(func() error {
		cm := &corev1.ConfigMap{}
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: deployer.ImagesConfigMap}, cm); err != nil {
			return err
		}
		cm.Data[deployer.ImagesKey] = imagesJSON(mao, proxy)
		return e.c.Update(e.ctx, cm)
	}))
}

// startOpenShift starts a control plane serving the config.openshift.io
// CRDs crds, and returns a client that knows their types.
func startOpenShift(t *testing.T, crds ...string) (*rest.Config, client.Client) {
	t.Helper()
	cfg, _ := testenv.Start(t, testenv.WithCRDs(crds...))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := configv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// setProxyStatus sets the Proxy's status, as the network operator does.
func setProxyStatus(t *testing.T, c client.Client, status configv1.ProxyStatus) {
	t.Helper()
	err := retryConflict(func() error {
		p := &configv1.Proxy{}
		if err := c.Get(t.Context(), types.NamespacedName{Name: deployer.ClusterProxyName}, p); err != nil {
			return err
		}
		p.Status = status
		return c.Status().Update(t.Context(), p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// proxyEnv is the machine-controller's proxy environment.
func proxyEnv(d *appsv1.Deployment) map[string]string {
	m := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != deployer.MachineContainer {
			continue
		}
		for _, ev := range c.Env {
			if slices.Contains(proxyEnvNames, ev.Name) {
				m[ev.Name] = ev.Value
			}
		}
	}
	return m
}
