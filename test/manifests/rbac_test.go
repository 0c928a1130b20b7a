package manifests_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	mao "github.com/openshift/machine-api-operator/pkg/controller"
	"github.com/openshift/machine-api-operator/pkg/controller/machinehealthcheck"
	"github.com/openshift/machine-api-operator/pkg/controller/machineset"
	"github.com/openshift/machine-api-operator/pkg/controller/nodelink"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The tests in this file run the controllers as their service accounts
// (impersonated) with nothing but the RBAC of an install (installs: the
// cloudscale.ch one and the Exoscale one), through a whole life cycle, and
// fail on any "forbidden": the RBAC is not only small (manifests_test.go)
// but enough.

// impersonate returns cfg acting as service account sa of Namespace.
func impersonate(cfg *rest.Config, sa string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + Namespace + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"},
	}
	return cfg
}

// logs captures the controllers' and client-go's log lines, as the
// provider's own integration tests do.
type logs struct{ fixture.Logs }

func (l *logs) logger() logr.Logger { return l.Logger() }

// forbidden returns the log lines that mention a refused request.
func (l *logs) forbidden() []string {
	var out []string
	for line := range strings.Lines(l.String()) {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// captureLogs sends klog and controller-runtime's global logger to a
// capture for the rest of the test.
func captureLogs(t *testing.T) *logs {
	l := &logs{}
	klog.SetLogger(l.logger())
	ctrllog.SetLogger(l.logger())
	captured = l
	t.Cleanup(func() {
		captured = nil
		klog.ClearLogger()
		if t.Failed() {
			t.Logf("logs:\n%s", l.String())
		}
	})
	return l
}

// setup starts a control plane (with opts) and installs the kustomization
// config/<dir> for real (install); c is an admin client, objs the
// rendering. The API server writes an audit log (see audit).
func setup(t *testing.T, dir string, opts ...testenv.Option) (cfg *rest.Config, c client.Client, a *audit, objs []*unstructured.Unstructured) {
	t.Helper()
	a = &audit{path: filepath.Join(t.TempDir(), "audit.log")}
	policy := filepath.Join(t.TempDir(), "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ = testenv.Start(t, append([]testenv.Option{func(env *envtest.Environment) {
		args := env.ControlPlane.GetAPIServer().Configure()
		// OpenShift's kube-apiserver enforces owner references: setting
		// blockOwnerDeletion needs the owner's finalizers subresource.
		args.Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
		args.Set("audit-policy-file", policy)
		args.Set("audit-log-path", a.path)
	}}, opts...)...)
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objs = render(t, dir)
	install(t, c, objs)
	eventually(t, time.Minute, "the Machine API CRDs served", func() (bool, error) {
		for _, l := range []client.ObjectList{&machinev1.MachineList{}, &machinev1.MachineSetList{}, &machinev1.MachineHealthCheckList{}} {
			if err := c.List(ctx, l, client.InNamespace(Namespace)); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	return cfg, c, a, objs
}

// installs are the kustomizations the tests below run the controllers
// with: config/default for cloudscale.ch (its RBAC is
// config/overlays/cloudscale's too), and the Exoscale overlay, whose names
// are Exoscale's.
var installs = []string{"default", "overlays/exoscale"}

// auditPolicy records who did what to which resource, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// audit is the API server's audit log.
type audit struct{ path string }

// request is one audited request.
type request struct {
	verb, group, resource, namespace string
	code                             int
}

func (r request) String() string {
	where := "cluster-wide"
	if r.namespace != "" {
		where = "in " + r.namespace
	}
	return fmt.Sprintf("%s %q %s %s", r.verb, r.group, r.resource, where)
}

// requests returns the distinct resource requests service account sa made.
func (a *audit) requests(t *testing.T, sa string) []request {
	t.Helper()
	data, err := os.ReadFile(a.path)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + Namespace + ":" + sa
	seen := map[request]bool{}
	var out []request
	for line := range strings.Lines(string(data)) {
		var ev struct {
			Verb             string                     `json:"verb"`
			ImpersonatedUser *struct{ Username string } `json:"impersonatedUser"`
			ObjectRef        *struct {
				APIGroup, Resource, Subresource, Namespace string
			} `json:"objectRef"`
			ResponseStatus *struct{ Code int } `json:"responseStatus"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != user || ev.ObjectRef == nil || ev.ResponseStatus == nil {
			continue
		}
		r := request{verb: ev.Verb, group: ev.ObjectRef.APIGroup, resource: ev.ObjectRef.Resource, namespace: ev.ObjectRef.Namespace, code: ev.ResponseStatus.Code}
		if ev.ObjectRef.Subresource != "" {
			r.resource += "/" + ev.ObjectRef.Subresource
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// checkAudit fails the test on any request of sa the API server refused
// (403), and logs the granted verbs the run never used: rules for code
// paths the test does not reach, or candidates for removal.
func checkAudit(t *testing.T, a *audit, sa string, objs []*unstructured.Unstructured) {
	t.Helper()
	reqs := a.requests(t, sa)
	if len(reqs) == 0 {
		t.Fatalf("the audit log has no request of %s", sa)
	}
	used := map[string]bool{}
	for _, r := range reqs {
		if r.code == 403 {
			t.Errorf("%s was refused: %s", sa, r)
		}
		used[r.verb+" "+r.group+"/"+r.resource] = true
	}
	rules := rbacOf(t, objs).rulesOf(sa)
	var unused []string
	for _, rs := range rules {
		for _, rule := range rs {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if !used[v+" "+g+"/"+res] {
							unused = append(unused, fmt.Sprintf("%s %q %s", v, g, res))
						}
					}
				}
			}
		}
	}
	slices.Sort(unused)
	t.Logf("%s: %d distinct requests; granted but not used in this run: %s", sa, len(reqs), strings.Join(slices.Compact(unused), ", "))
}

// start runs mgr until the test ends.
func start(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	testenv.Run(t, mgr)
}

// captured is the running test's log capture, if any: eventually stops
// waiting at the first refused request.
var captured *logs

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		if captured != nil {
			if lines := captured.forbidden(); len(lines) > 0 {
				t.Fatalf("waiting for %s: a request was refused:\n%s", what, lines[0])
			}
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
}

func key(name string) client.ObjectKey { return client.ObjectKey{Namespace: Namespace, Name: name} }

func assertLeaseHeld(t *testing.T, c client.Client, name string) {
	t.Helper()
	var lease coordinationv1.Lease
	if err := c.Get(context.Background(), key(name), &lease); err != nil {
		t.Errorf("lease %s: %v", name, err)
	} else if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %s has no holder", name)
	}
}

func assertNoForbidden(t *testing.T, l *logs) {
	t.Helper()
	if lines := l.forbidden(); len(lines) > 0 {
		t.Errorf("requests were refused (%d log lines), e.g.:\n%s", len(lines), strings.Join(lines[:min(len(lines), 5)], "\n"))
	}
}

// TestDeployerWithItsRBAC runs the deployer as machine-api-provider-deployer
// with each install's RBAC and flags (--cloud, --service-account), on an
// API server that serves the cluster-wide Proxy as OpenShift does: it
// applies the controllers' Deployment, named after the cloud, with the
// Proxy's settings, applies the trusted CA ConfigMap and rolls the
// Deployment for an injected bundle, reports in its status ConfigMap and
// with events, holds its lease, and deletes the Deployment again when the
// machine-api-operator runs its own.
func TestDeployerWithItsRBAC(t *testing.T) {
	for _, k := range installs {
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) { deployerWithItsRBAC(t, k) })
	}
}

func deployerWithItsRBAC(t *testing.T, dir string) {
	cfg, c, a, objs := setup(t, dir, testenv.WithCRDs(testenv.ProxyCRD(t), testenv.InfrastructureCRD(t), testenv.APIServerCRD(t)))
	l := captureLogs(t)
	ctx := context.Background()
	flags := deployerFlags(t, objs)
	// The cluster's identity, which the deployer reads (as its service
	// account) and hands to the manager.
	infra := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
		"metadata": map[string]any{"name": "cluster"},
		"spec":     map[string]any{},
	}}
	if err := c.Create(ctx, infra); err != nil {
		t.Fatal(err)
	}
	infra.Object["status"] = map[string]any{"infrastructureName": "rbac-test-x7k2p", "platform": "External",
		"controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable"}
	if err := c.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
	controllers := controllersSA(t, objs)
	name := deployer.DeploymentName(cloudOf(t, objs))
	lease := flags["leader-election-id"]
	if lease == "" {
		lease = deployer.ManagedByValue
	}

	proxy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
		"metadata": map[string]any{"name": "cluster"},
		"spec":     map[string]any{"httpsProxy": "http://proxy.example:3128"},
	}}
	if err := c.Create(ctx, proxy); err != nil {
		t.Fatal(err)
	}
	proxy.Object["status"] = map[string]any{"httpsProxy": "http://proxy.example:3128", "noProxy": ".cluster.local,.svc"}
	if err := c.Status().Update(ctx, proxy); err != nil {
		t.Fatal(err)
	}

	// the TLS profile the newest release's TLS flags are rendered from
	// (the deployer lists and watches the APIServer named cluster)
	createAPIServer(t, c)

	images := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: Namespace},
		Data: map[string]string{deployer.ImagesKey: `{"machineAPIOperator": "quay.io/openshift/origin-machine-api-operator:test",
			"kubeRBACProxy": "quay.io/openshift/origin-kube-rbac-proxy:test", "clusterAPIControllerAWS": "unused"}`},
	}
	if err := c.Create(ctx, images); err != nil {
		t.Fatal(err)
	}
	mgr, err := deployer.NewManager(impersonate(cfg, DeployerSA), deployer.ManagerOptions{
		Options: deployer.Options{
			Namespace:      Namespace,
			ProviderImage:  "machine-api-provider:latest",
			ServiceAccount: controllers,
			Cloud:          flags["cloud"],
		},
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		LeaderElection:         true,
		LeaderElectionID:       flags["leader-election-id"],
		Log:                    l.logger(),
		AllowManyPerProcess:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, mgr)

	deployed := func(reason string) func() (bool, error) {
		return func() (bool, error) {
			conds, err := deployer.ReadConditions(ctx, c, Namespace)
			if err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(conds, deployer.ConditionDeployed)
			return cond != nil && cond.Reason == reason, fmt.Errorf("condition %+v", cond)
		}
	}
	eventually(t, time.Minute, "the Deployment applied (Deployed: Applied)", deployed(deployer.ReasonApplied))
	var d appsv1.Deployment
	if err := c.Get(ctx, key(name), &d); err != nil {
		t.Fatal(err)
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != controllers {
		t.Errorf("the controllers run as %q, want %s", sa, controllers)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == deployer.MachineContainer && slices.Contains(c.Args, "--cluster-id=rbac-test-x7k2p")
	}) {
		t.Errorf("the machine-controller is not pinned to the Infrastructure's infrastructureName")
	}
	if err := c.Get(ctx, key(controllers), &corev1.ServiceAccount{}); err != nil {
		t.Errorf("the controllers' service account: %v", err)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == deployer.MachineContainer && slices.Contains(c.Env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.example:3128"})
	}) {
		t.Errorf("the machine-controller does not get the cluster-wide proxy")
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
		return c.Name == deployer.MachineSetContainer && slices.Contains(c.Args, "--tls-min-version=VersionTLS12")
	}) {
		t.Errorf("the machineset-controller of %s does not get the TLS flags of the APIServer's profile", deployer.Newest())
	}

	// The network operator injects the trust bundle into the deployer's
	// ConfigMap: the Deployment rolls.
	var ca corev1.ConfigMap
	eventually(t, 30*time.Second, "the trusted CA ConfigMap", func() (bool, error) {
		err := c.Get(ctx, key(deployer.TrustedCAConfigMap), &ca)
		return err == nil && ca.Labels[deployer.InjectTrustedCABundleLabel] == "true", err
	})
	ca.Data = map[string]string{deployer.TrustedCAKey: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
	if err := c.Update(ctx, &ca); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Deployment rolled for the bundle", func() (bool, error) {
		if err := c.Get(ctx, key(name), &d); err != nil {
			return false, err
		}
		h := d.Spec.Template.Annotations[deployer.TrustedCAHashAnnotation]
		return h == deployer.HashTrustedCA(ca.Data[deployer.TrustedCAKey]), fmt.Errorf("hash %q", h)
	})

	// The operator starts its own controllers: the deployer steps back.
	labels := map[string]string{"k8s-app": "controller"}
	op := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deployer.OperatorDeploymentName, Namespace: Namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "operator:test"}}},
			},
		},
	}
	if err := c.Create(ctx, op); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the deployer to stand back", deployed(deployer.ReasonOperatorDeploymentPresent))
	eventually(t, 30*time.Second, "our Deployment deleted", func() (bool, error) {
		err := c.Get(ctx, key(name), &appsv1.Deployment{})
		return apierrors.IsNotFound(err), err
	})
	eventually(t, 30*time.Second, "the deployer's events", func() (bool, error) {
		var events corev1.EventList
		if err := c.List(ctx, &events, client.InNamespace(Namespace)); err != nil {
			return false, err
		}
		reasons := map[string]bool{}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == deployer.StatusConfigMap {
				reasons[ev.Reason] = true
			}
		}
		return reasons[deployer.ReasonApplied] && reasons[deployer.ReasonOperatorDeploymentPresent], fmt.Errorf("reasons %v", reasons)
	})
	assertLeaseHeld(t, c, lease)
	assertNoForbidden(t, l)
	checkAudit(t, a, DeployerSA, objs)
}

// TestControllersWithTheirRBAC runs, as each install's controllers'
// service account (the deployer's --service-account), everything the
// deployer's Deployment runs: this provider's manager for the install's
// cloud (the deployer's --cloud; the machine and drain controllers with the
// actuator, the capacity publisher) on that cloud's emulator, and the
// machine-api-operator's machineset, nodelink and machine-healthcheck
// controllers, all with leader election. A MachineSet scaled to one makes
// a Machine with credentials and user data from secrets; a Node appears and
// is linked; a MachineHealthCheck watches; scaled to zero, the Machine's
// Node is drained (a pod evicted, a DaemonSet's left) and deleted, and so
// is the Machine.
func TestControllersWithTheirRBAC(t *testing.T) {
	for _, k := range installs {
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) { controllersWithTheirRBAC(t, k) })
	}
}

// emulated is a cloud's emulator with the provider's Cloud pointed at it,
// the secrets the Machines name and a provider spec naming them.
type emulated struct {
	cloud   cloud.Cloud
	secrets map[string]map[string]string
	spec    string
}

// emulate starts the emulator of the cloud named name (the manager's
// --cloud) until the test ends.
func emulate(t *testing.T, name string) emulated {
	t.Helper()
	var h http.Handler
	var e emulated
	switch name {
	case cscloud.Name:
		emu, err := emucs.New(emucs.Config{BootTime: 100 * time.Millisecond, ActionTime: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		h = emu
		e.secrets = map[string]map[string]string{
			"cloudscale-token": {"token": "token-from-secret"},
			"worker-user-data": {"userData": `{"ignition":{"version":"3.2.0"}}`},
		}
		// The selector makes the provider list secrets (by label).
		e.spec = `{"apiVersion":"machine.appuio.io/v1beta1",
			"kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"flex-8-4","image":"custom:rhcos-4.19","interfaces":[{"type":"Public"}],
			"tokenSecret":{"name":"cloudscale-token"},"userDataSecret":{"name":"worker-user-data"},
			"userDataSecretSelector":{"matchLabels":{"machineconfiguration.openshift.io/managed-ca-bundle-derived-from-configmap":""}}}`
	case exocloud.Name:
		emu, err := emuexo.New(emuexo.Config{BootTime: 100 * time.Millisecond, ActionTime: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		h = emu
		e.secrets = map[string]map[string]string{
			"exoscale-credentials": {exocloud.KeyAPIKey: emuexo.DefaultAPIKey, exocloud.KeyAPISecret: emuexo.DefaultAPISecret},
			"worker-user-data":     {"userData": `{"ignition":{"version":"3.4.0"}}`},
		}
		e.spec = `{"apiVersion":"machine.appuio.io/v1beta1",
			"kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"rhcos-4.19"},
			"diskSize":50,"credentialsSecret":{"name":"exoscale-credentials"},"userDataSecret":{"name":"worker-user-data"}}`
	default:
		t.Fatalf("no emulator for the cloud %q", name)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	switch name {
	case cscloud.Name:
		e.cloud = cscloud.New(cscloud.Options{BaseURL: srv.URL + "/", DefaultToken: "default-token"})
	case exocloud.Name:
		e.cloud = exocloud.New(exocloud.Options{APIEndpoint: srv.URL + "/v2"})
	}
	if e.cloud.Name() != name {
		t.Fatalf("the cloud %q is named %q", name, e.cloud.Name())
	}
	return e
}

func controllersWithTheirRBAC(t *testing.T, dir string) {
	cfg, c, a, objs := setup(t, dir)
	l := captureLogs(t)
	ctx := context.Background()
	controllers := controllersSA(t, objs)
	as := impersonate(cfg, controllers)
	emu := emulate(t, cloudOf(t, objs))

	for name, data := range emu.secrets {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, StringData: data}); err != nil {
			t.Fatal(err)
		}
	}

	// The manager as the deployer runs it: --cloud, --leader-elect=true,
	// the lease named by the manager (<cloud>-machine-api-provider).
	const cluster = "rbac-test-x1y2z"
	provider, err := manager.New(as, manager.Options{
		Cloud:                   emu.cloud,
		ClusterID:               cluster,
		Namespace:               Namespace,
		MaxConcurrentReconciles: 2,
		CapacityPublisher:       true,
		MetricsBindAddress:      "0",
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		Log:                     l.logger(),
		AllowManyPerProcess:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, provider)
	start(t, machineAPIControllers(t, as, l.logger()))

	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": cluster, "machine.openshift.io/cluster-api-machineset": "workers"}
	one := int32(1)
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: Namespace, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": cluster}},
		Spec: machinev1.MachineSetSpec{
			Replicas: &one,
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: labels}},
		},
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(emu.spec)}
	if err := c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	maxUnhealthy := intstr.FromString("100%")
	mhc := &machinev1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: Namespace},
		Spec: machinev1.MachineHealthCheckSpec{
			Selector:     metav1.LabelSelector{MatchLabels: labels},
			MaxUnhealthy: &maxUnhealthy,
			UnhealthyConditions: []machinev1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: time.Hour}},
			},
		},
	}
	if err := c.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}

	// The machineset controller creates the Machine, the provider
	// provisions it (token and user data from the secrets).
	var m machinev1.Machine
	eventually(t, 2*time.Minute, "a Machine with a providerID", func() (bool, error) {
		var list machinev1.MachineList
		if err := c.List(ctx, &list, client.InNamespace(Namespace)); err != nil {
			return false, err
		}
		if len(list.Items) != 1 {
			return false, fmt.Errorf("%d machines", len(list.Items))
		}
		m = list.Items[0]
		return m.Spec.ProviderID != nil, fmt.Errorf("phase %v, conditions %v", m.Status.Phase, m.Status.Conditions)
	})
	eventually(t, 30*time.Second, "the MachineSet's capacity annotations", func() (bool, error) {
		if err := c.Get(ctx, key(ms.Name), ms); err != nil {
			return false, err
		}
		return ms.Annotations["machine.openshift.io/vCPU"] != "", fmt.Errorf("annotations %v", ms.Annotations)
	})

	// The Node registers; nodelink links it.
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name},
		Spec:       corev1.NodeSpec{ProviderID: *m.Spec.ProviderID},
	}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "nodelink to link Machine and Node", func() (bool, error) {
		if err := c.Get(ctx, key(m.Name), &m); err != nil {
			return false, err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err
		}
		return m.Status.NodeRef != nil && node.Annotations["machine.openshift.io/machine"] == Namespace+"/"+m.Name,
			fmt.Errorf("nodeRef %v, node annotations %v", m.Status.NodeRef, node.Annotations)
	})
	eventually(t, time.Minute, "the MachineHealthCheck's status", func() (bool, error) {
		if err := c.Get(ctx, key(mhc.Name), mhc); err != nil {
			return false, err
		}
		return mhc.Status.ExpectedMachines != nil && *mhc.Status.ExpectedMachines == 1, fmt.Errorf("status %+v", mhc.Status)
	})

	// A finished pod on the Node, in another namespace: the drain evicts it.
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-pod", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:      node.Name,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "registry.example/job:1"}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// And a DaemonSet's pod: the drain looks up the DaemonSet, and leaves
	// the pod.
	dsLabels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: dsLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: dsLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/agent:1"}}},
			},
		},
	}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	dsPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-x", Namespace: "default", Labels: dsLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "registry.example/agent:1"}}},
	}
	if err := c.Create(ctx, dsPod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// Scaled to zero: the machineset controller deletes the Machine; the
	// drain controller cordons the Node and evicts the pod; the provider
	// deletes the server, then the Node, then lets the Machine go.
	zero := int32(0)
	ms.Spec.Replicas = &zero
	if err := c.Update(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "Machine, Node and pod gone", func() (bool, error) {
		var gone []string
		for _, o := range []client.Object{&machinev1.Machine{ObjectMeta: m.ObjectMeta}, node, pod} {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
			switch {
			case apierrors.IsNotFound(err):
				gone = append(gone, fmt.Sprintf("%T", o))
			case err != nil:
				return false, err
			}
		}
		return len(gone) == 3, fmt.Errorf("gone: %v", gone)
	})

	for _, lease := range []string{cloudOf(t, objs) + "-machine-api-provider", "cluster-api-provider-machineset-leader"} {
		assertLeaseHeld(t, c, lease)
	}
	assertNoForbidden(t, l)
	checkAudit(t, a, controllers, objs)
}

// machineAPIControllers is the machine-api-operator's machineset, nodelink
// and machine-healthcheck controllers on one manager (in the Deployment
// they are three binaries with the same service account).
func machineAPIControllers(t *testing.T, cfg *rest.Config, log logr.Logger) ctrl.Manager {
	t.Helper()
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{Namespace: {}}},
		LeaderElection:          true,
		LeaderElectionID:        "cluster-api-provider-machineset-leader",
		LeaderElectionNamespace: Namespace,
		Logger:                  log.WithName("machine-api"),
		Controller:              config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := manager.FeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	if err := mao.AddToManagerWithFeatureGates(mgr, ctrl.Options{}, gate, machineset.Add); err != nil {
		t.Fatal(err)
	}
	if err := mao.AddToManager(mgr, ctrl.Options{}, nodelink.Add, machinehealthcheck.Add); err != nil {
		t.Fatal(err)
	}
	return mgr
}
