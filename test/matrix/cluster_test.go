package matrix

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/demo"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/installmanifests"
	"github.com/appuio/machine-api-provider/pkg/localcluster"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

const (
	namespace = deployer.DefaultNamespace
	clusterID = "matrix-x7k2p"
	// masterNode is the Node of this machine the pods are bound to: the
	// controllers and the deployer run on control plane nodes.
	masterNode = "master-0"
	// fieldOwner is the field manager of the test's applies.
	fieldOwner = "make-matrix"
	// providerImage is the image config/ names for the provider (its
	// kustomizations' `images:`), which the pod runner plays with the
	// image's static binary.
	providerImage = "machine-api-provider:latest"
)

// era is one OpenShift release whose machine-api-operator binaries the
// matrix runs.
type era struct {
	// name is "4.16"; version the ClusterVersion's ("4.16.0").
	name, version string
	// dir is bin/mao-<era>: the binaries, webhooks, install/.
	dir string
}

// maoImage and proxyImage are the era's images as its images ConfigMap
// names them (the release payload's references).
func (e era) maoImage() string   { return "quay.io/openshift/origin-machine-api-operator:" + e.name }
func (e era) proxyImage() string { return "quay.io/openshift/origin-kube-rbac-proxy:" + e.name }

// cell is one era on one cloud: a control plane and all that runs on it.
type cell struct {
	t        *testing.T
	era      era
	cloud    string
	provider string // the provider image's static binary
	dir      string
	ctx      context.Context

	cluster *localcluster.Cluster
	admin   client.Client
	cs      kubernetes.Interface
	hostIP  string
	audit   string
	objs    []*unstructured.Unstructured // the install's rendering
	ca      *localcluster.ServiceCA
	servers bootsim.Cloud
	emuURL  string
	ccm     *localcluster.Process
	pods    []*localcluster.Pod
	res     *result
}

// start stands up the control plane with the era's CRDs and an audit log.
func (c *cell) start() {
	t := c.t
	c.audit = filepath.Join(c.dir, "audit.log")
	policy := filepath.Join(c.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	crds := c.eraCRDs()
	crds = append(crds, testenv.InfrastructureCRD(t), testenv.DNSCRD(t), testenv.ClusterVersionCRD(t), testenv.ProxyCRD(t), testenv.APIServerCRD(t))
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	c.cluster, err = localcluster.Start(localcluster.Options{
		BinDir: bin, CRDs: crds, Dir: c.dir,
		APIServerArgs: map[string][]string{
			"audit-policy-file": {policy},
			"audit-log-path":    {c.audit},
			// OpenShift's kube-apiserver enforces owner references.
			"enable-admission-plugins": {"OwnerReferencesPermissionEnforcement"},
			// Webhook Services are reached at their endpoints (the pod's
			// IP), as no kube-proxy routes their cluster IPs here.
			"enable-aggregator-routing": {"true"},
		},
	})
	t.Cleanup(func() {
		if c.cluster != nil {
			if err := c.cluster.Stop(); err != nil {
				t.Logf("stopping the control plane: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	if c.admin, err = client.New(c.cluster.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if c.cs, err = kubernetes.NewForConfig(c.cluster.Config); err != nil {
		t.Fatal(err)
	}
	if c.hostIP, err = localcluster.HostIP(); err != nil {
		t.Fatal(err)
	}
}

// eraCRDs are the Machine API CRDs of the era's machine-api-operator
// (install/, the Default feature set's: crds_test.go).
func (c *cell) eraCRDs() []string {
	crds, err := defaultFeatureSetCRDs(filepath.Join(c.era.dir, "install"))
	if err != nil {
		c.t.Fatalf("%v: run `make mao-%s`", err, c.era.name)
	}
	return crds
}

// openShift creates what an OpenShift cluster of the era has before the
// provider is installed: the namespace, the config.openshift.io objects
// (an External platform, the DNS, a completed ClusterVersion of the era,
// the Proxy, the APIServer with its TLS profile), the machine-api-operator's manifests that the controllers'
// pod needs (the webhook and metrics Services, the kube-rbac-proxy
// ConfigMap, the images ConfigMap naming the era's images), the service
// CA's certificates and the era's webhook configurations.
func (c *cell) openShift() {
	t, ctx := c.t, c.ctx
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(testenv.CreateOpenShiftNamespaces(ctx, c.admin))
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Spec.PlatformSpec = configv1.PlatformSpec{Type: configv1.ExternalPlatformType, External: &configv1.ExternalPlatformSpec{PlatformName: c.cloud}}
	must(c.admin.Create(ctx, infra))
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName: clusterID,
		PlatformStatus: &configv1.PlatformStatus{Type: configv1.ExternalPlatformType, External: &configv1.ExternalPlatformStatus{
			CloudControllerManager: configv1.CloudControllerManagerStatus{State: configv1.CloudControllerManagerExternal},
		}},
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		APIServerURL: c.cluster.Config.Host, APIServerInternalURL: c.cluster.Config.Host, EtcdDiscoveryDomain: "",
	}
	must(c.admin.Status().Update(ctx, infra))
	must(c.admin.Create(ctx, &configv1.DNS{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: configv1.DNSSpec{BaseDomain: "matrix.example.com"}}))
	must(c.admin.Create(ctx, &configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}))
	// the TLS profile: 4.22's machineset-controller reads it, the deployer
	// renders 4.22's TLS flags from it
	must(c.admin.Create(ctx, demo.APIServer()))

	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: deployer.ClusterVersionName}}
	cv.Spec.ClusterID = "0b4a2f5e-7d1c-4a3e-9c55-0e1f2a3b4c5d"
	cv.Spec.Channel = "stable-" + c.era.name
	must(c.admin.Create(ctx, cv))
	now := metav1.Now()
	image := "quay.io/openshift-release-dev/ocp-release:" + c.era.version + "-x86_64"
	cv.Status = configv1.ClusterVersionStatus{
		Desired: configv1.Release{Version: c.era.version, Image: image},
		History: []configv1.UpdateHistory{{
			State: configv1.CompletedUpdate, Version: c.era.version, Image: image, StartedTime: now, CompletionTime: &now,
		}},
		ObservedGeneration: cv.Generation, VersionHash: "matrix",
	}
	must(c.admin.Status().Update(ctx, cv))

	// The machine-api-operator's manifests the controllers' pod and its
	// Services need; the images ConfigMap as the release payload fills
	// it in (the era's image references).
	for _, u := range c.eraManifests() {
		switch {
		case u.GetKind() == "Service" && slices.Contains([]string{"machine-api-operator-webhook", "machine-api-controllers"}, u.GetName()),
			u.GetKind() == "ConfigMap" && u.GetName() == "kube-rbac-proxy":
			must(c.apply(u))
		case u.GetKind() == "ConfigMap" && u.GetName() == deployer.ImagesConfigMap:
			data, _, _ := unstructured.NestedString(u.Object, "data", deployer.ImagesKey)
			images := map[string]string{}
			must(json.Unmarshal([]byte(data), &images))
			images["machineAPIOperator"], images["kubeRBACProxy"] = c.era.maoImage(), c.era.proxyImage()
			out, err := json.Marshal(images)
			must(err)
			must(unstructured.SetNestedField(u.Object, string(out), "data", deployer.ImagesKey))
			must(c.apply(u))
		}
	}

	// The service CA: serving certificates of the Services that ask for
	// one, and their CA injected into the webhook configurations.
	ca, err := localcluster.NewServiceCA("make matrix")
	must(err)
	c.ca = ca
	for svc, secret := range map[string]string{
		"machine-api-operator-webhook": "machine-api-operator-webhook-cert",
		"machine-api-controllers":      "machine-api-controllers-tls",
		"machine-api-provider-webhook": "machine-api-provider-webhook-cert",
	} {
		crt, key, err := c.ca.Serving(svc, namespace)
		must(err)
		must(c.admin.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: namespace},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
		}))
	}
	out, err := exec.Command(filepath.Join(c.era.dir, "webhooks")).Output()
	if err != nil {
		t.Fatalf("%s/webhooks: %v", c.era.dir, err)
	}
	var list unstructured.UnstructuredList
	must(list.UnmarshalJSON(out))
	for i := range list.Items {
		must(c.apply(c.injectCA(&list.Items[i])))
	}
}

// eraManifests are the era's install/ manifests.
func (c *cell) eraManifests() []*unstructured.Unstructured {
	files, err := filepath.Glob(filepath.Join(c.era.dir, "install", "*.yaml"))
	if err != nil {
		c.t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		objs, err := installmanifests.Decode(data)
		if err != nil {
			c.t.Fatalf("%s: %v", f, err)
		}
		out = append(out, objs...)
	}
	return out
}

// injectCA sets the service CA as the caBundle of every webhook of a
// webhook configuration, as the service CA operator does for those
// annotated service.beta.openshift.io/inject-cabundle.
func (c *cell) injectCA(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	for i := range hooks {
		h := hooks[i].(map[string]any)
		if err := unstructured.SetNestedField(h, base64.StdEncoding.EncodeToString(c.ca.CertPEM), "clientConfig", "caBundle"); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
		c.t.Fatal(err)
	}
	return u
}

// install renders config/overlays/<cloud> with the pinned kustomize and
// applies it all, as an admin would on OpenShift: the RBAC exactly, the
// deployer (told where the emulated cloud is, as a user's patch of its
// arguments would), the provider's webhooks with the injected CA. Only the
// ServiceMonitor and the PrometheusRule are left out (no Prometheus operator
// serves their kinds).
func (c *cell) install() {
	t := c.t
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(repoRoot(t), "config", "overlays", c.cloud))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build config/overlays/%s: %v\n%s", c.cloud, err, stderr.String())
	}
	if c.objs, err = installmanifests.Decode(stdout.Bytes()); err != nil {
		t.Fatal(err)
	}
	for _, u := range c.objs {
		u = u.DeepCopy()
		switch {
		case u.GetKind() == "ServiceMonitor", u.GetKind() == "PrometheusRule":
			continue
		case strings.HasSuffix(u.GetKind(), "WebhookConfiguration"):
			u = c.injectCA(u)
		case u.GetKind() == "Deployment" && u.GetName() == deployerDeployment:
			c.pointAtEmulator(u)
		}
		if err := c.apply(u); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// pointAtEmulator adds the deployer's flag that hands the provider the
// emulator's address.
func (c *cell) pointAtEmulator(u *unstructured.Unstructured) {
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	d := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(d, "args")
	switch c.cloud {
	case demo.Cloudscale:
		args = append(args, "--cloudscale-api-url="+c.emuURL+"/")
	case demo.Exoscale:
		args = append(args, "--exoscale-api-endpoint="+c.emuURL+"/v2")
	}
	if err := unstructured.SetNestedStringSlice(d, args, "args"); err != nil {
		c.t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		c.t.Fatal(err)
	}
}

// emulate starts the cloud's emulator on this machine and creates the
// credentials secret the deployer hands the provider.
func (c *cell) emulate() {
	t := c.t
	var h http.Handler
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}}
	switch c.cloud {
	case demo.Cloudscale:
		emu, err := emucs.New(emucs.Config{BootTime: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		h, c.servers = emu, demo.CloudscaleServers(emu)
		secret.Name, secret.StringData = "cloudscale-token", map[string]string{"token": "matrix-token"}
	case demo.Exoscale:
		emu, err := emuexo.New(emuexo.Config{BootTime: time.Second, ActionTime: 500 * time.Millisecond, OperationTime: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		h, c.servers = emu, demo.ExoscaleServers(emu)
		secret.Name = "exoscale-credentials"
		secret.StringData = map[string]string{exocloud.KeyAPIKey: emuexo.DefaultAPIKey, exocloud.KeyAPISecret: emuexo.DefaultAPISecret}
	default:
		t.Fatalf("no cloud %q", c.cloud)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c.emuURL = srv.URL
	if err := c.admin.Create(c.ctx, secret); err != nil {
		t.Fatal(err)
	}
	// The installer's worker user data, which names no hostname: the
	// provider gives each server its Machine's (pkg/userdata).
	if err := c.admin.Create(c.ctx, demo.WorkerUserData(clusterID)); err != nil {
		t.Fatal(err)
	}
}

// providerSpec is the worker MachineSet's provider spec on the cloud, with
// the installer's worker user data; the credentials are the deployer's
// default ones.
func (c *cell) providerSpec() string {
	if c.cloud == demo.Exoscale {
		return fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.large","template":{"name":%q},"diskSize":50,"userDataSecret":{"name":%q}}`,
			emuexo.DefaultTemplates[0].Name, demo.WorkerUserDataSecret)
	}
	return fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"flex-8-4","image":"custom:rhcos-4.19","rootVolumeSizeGB":50,"interfaces":[{"type":"Public"}],"userDataSecret":{"name":%q}}`, demo.WorkerUserDataSecret)
}

// apply applies u server-side as the test.
func (c *cell) apply(u *unstructured.Unstructured) error {
	return retry.OnError(retry.DefaultBackoff, func(err error) bool { return !errors.Is(err, context.Canceled) }, func() error {
		return c.admin.Apply(c.ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership)
	})
}

// repoRoot is two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}
