package release_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// Namespace is where OpenShift keeps the Machine API, and the release
// installs into.
const Namespace = "openshift-machine-api"

// TestInstallFromReleaseManifests installs each cloud's release from its
// install-<cloud>.yaml alone, in a fresh directory (no repository, no
// kustomize, no Go), on a control plane shaped like OpenShift (the Machine
// API's CRDs and namespace, the ClusterVersion, the Proxy, the
// ServiceMonitor and PrometheusRule APIs, the machine-api-operator's images ConfigMap), as `oc
// apply -f` does: every document applied, namespaces and CRDs first. Then
// the deployer comes up as its pod would: the binary of the release's
// image, with the command, arguments and environment of the Deployment the
// API server now holds, authenticated by a token of its service account
// (not impersonated). It must become ready, take its lease, and apply the
// controllers' Deployment with the release's image by digest, run as the
// controllers' service account; the API server must refuse none of its
// requests.
func TestInstallFromReleaseManifests(t *testing.T) {
	r := makeRelease(t)
	admin, tools := unpack(t, r)
	img := readOCI(t, filepath.Join(r.dir, "machine-api-provider.oci.tar"))
	// Where the image's binary runs: a node, not the admin's directory.
	node := t.TempDir()
	binary := filepath.Join(node, "machine-api-provider")
	if err := os.WriteFile(binary, img.files["machine-api-provider"], 0o755); err != nil {
		t.Fatal(err)
	}
	if ep := img.config.Config.Entrypoint; len(ep) != 1 || ep[0] != "/machine-api-provider" {
		t.Fatalf("the image's entrypoint is %v", ep)
	}
	for _, cloud := range clouds {
		t.Run(cloud, func(t *testing.T) { installFromReleaseManifests(t, r, cloud, binary, admin, tools) })
	}
}

// installFromReleaseManifests installs from the release as unpacked in the
// admin's directory (unpack), and runs the release's command-line tool
// there against the cluster, with no Go on the PATH.
func installFromReleaseManifests(t *testing.T, r *release, cloud, binary, admin, tools string) {
	manifest := filepath.Join(admin, "install-"+cloud+".yaml")

	auditLog := filepath.Join(t.TempDir(), "audit.log")
	policy := filepath.Join(t.TempDir(), "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	smCRD := filepath.Join(t.TempDir(), "monitoring.yaml")
	if err := os.WriteFile(smCRD, []byte(monitoringCRDs), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := testenv.Start(t, testenv.WithCRDs(append(testenv.MachineAPICRDs(t), testenv.ProxyCRD(t), testenv.ClusterVersionCRD(t), testenv.InfrastructureCRD(t), smCRD)...),
		func(env *envtest.Environment) {
			args := env.ControlPlane.GetAPIServer().Configure()
			args.Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
			args.Set("audit-policy-file", policy)
			args.Set("audit-log-path", auditLog)
		})
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	openShift(t, c)

	// oc apply -f install-<cloud>.yaml
	objs := readObjects(t, manifest)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return applyRank(a) - applyRank(b) })
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("oc"), client.ForceOwnership); err != nil {
			t.Fatalf("oc apply -f %s: %s %s: %v", filepath.Base(manifest), u.GetKind(), u.GetName(), err)
		}
	}
	t.Logf("applied the %d objects of install-%s.yaml", len(objs), cloud)

	// The deployer's pod.
	var d appsv1.Deployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: "machine-api-provider-deployer"}, &d); err != nil {
		t.Fatal(err)
	}
	p := startPod(t, cfg, c, &d, binary)

	var controllersSA string
	for _, a := range p.args {
		if v, ok := strings.CutPrefix(a, "--service-account="); ok {
			controllersSA = v
		}
	}
	name := deployer.DeploymentName(cloud)
	user := "system:serviceaccount:" + Namespace + ":" + d.Spec.Template.Spec.ServiceAccountName
	// A refused request fails at once, rather than at the timeout.
	p.refused = func() []string { _, refused := audited(t, auditLog, user); return refused }
	eventually(t, p, 2*time.Minute, "the deployer ready and "+name+" applied", func() (bool, error) {
		if err := p.ready(); err != nil {
			return false, err
		}
		var cd appsv1.Deployment
		if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, &cd); err != nil {
			return false, err
		}
		conds, err := deployer.ReadConditions(ctx, c, Namespace)
		if err != nil {
			return false, err
		}
		if cond := meta.FindStatusCondition(conds, deployer.ConditionDeployed); cond == nil || cond.Reason != deployer.ReasonApplied {
			return false, fmt.Errorf("condition %+v", cond)
		}
		return true, nil
	})

	var cd appsv1.Deployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, &cd); err != nil {
		t.Fatal(err)
	}
	if sa := cd.Spec.Template.Spec.ServiceAccountName; sa == "" || sa != controllersSA {
		t.Errorf("%s runs as %q, want the deployer's --service-account %q", name, sa, controllersSA)
	}
	i := slices.IndexFunc(cd.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == deployer.MachineContainer })
	if i < 0 {
		t.Fatalf("%s has no %s", name, deployer.MachineContainer)
	}
	if image := cd.Spec.Template.Spec.Containers[i].Image; image != r.image() {
		t.Errorf("the machine-controller runs %s, want the release's %s", image, r.image())
	}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: deployer.ManagedByValue}, &lease); err != nil {
		t.Errorf("the deployer's lease: %v", err)
	} else if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Error("the deployer's lease has no holder")
	}

	// Every request the deployer made was its service account's own, and
	// none was refused.
	requests, refused := audited(t, auditLog, user)
	if requests == 0 {
		t.Errorf("the audit log has no request of %s", user)
	}
	for _, r := range refused {
		t.Errorf("refused: %s", r)
	}
	t.Logf("%s made %d requests; %s runs %s", user, requests, name, r.image())

	// The release's tool, from the admin's PATH (no Go), reads the
	// installed cluster: uninstall's plan, for the cloud the installed
	// deployer serves (no --cloud), names what it would stop and delete,
	// and changes nothing.
	out, err := asAdmin(admin, tools, "machine-api-provider", "uninstall", "--kubeconfig", adminKubeconfig(t, cfg, t.TempDir()))
	if err != nil {
		t.Fatalf("machine-api-provider uninstall (the plan): %v\n%s", err, out)
	}
	for _, want := range []string{"Release plan on " + cloud, "Deployment machine-api-provider-deployer (scaled to 0)", fmt.Sprintf("Delete the provider's objects: %d", len(objs)+3)} {
		if !strings.Contains(out, want) {
			t.Errorf("the release's uninstall plan lacks %q:\n%s", want, out)
		}
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: "machine-api-provider-deployer"}, &d); err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas == 0 {
		t.Errorf("the deployer after the dry run: %v, %v replicas", err, d.Spec.Replicas)
	}
}

// applyRank orders objects as `oc apply -f` needs them: namespaces, then
// CRDs, then the rest as they come.
func applyRank(u *unstructured.Unstructured) int {
	switch u.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	}
	return 2
}

// openShift creates what an OpenShift cluster has before the release is
// installed: the Machine API's namespace, the ClusterVersion, the Proxy,
// the machine-api-operator's images ConfigMap, and the admin's credentials
// secret of docs/install.md.
func openShift(t *testing.T, c client.Client) {
	t.Helper()
	ctx := t.Context()
	if err := testenv.CreateOpenShiftNamespaces(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: Namespace},
			Data: map[string]string{deployer.ImagesKey: `{"machineAPIOperator": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:` + strings.Repeat("1", 64) + `",
				"kubeRBACProxy": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:` + strings.Repeat("2", 64) + `"}`},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudscale-token", Namespace: Namespace}, StringData: map[string]string{"token": "x"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "exoscale-credentials", Namespace: Namespace}, StringData: map[string]string{"api-key": "EXOx", "api-secret": "x"}},
		&configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}},
		&configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: deployer.ClusterVersionName}, Spec: configv1.ClusterVersionSpec{ClusterID: "0b4a2f5e-7d1c-4a3e-9c55-0e1f2a3b4c5d"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cv := &configv1.ClusterVersion{}
	if err := c.Get(ctx, types.NamespacedName{Name: deployer.ClusterVersionName}, cv); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	release := configv1.Release{Version: "4.19.9", Image: "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("a", 64)}
	cv.Status = configv1.ClusterVersionStatus{
		Desired: release, VersionHash: "x", ObservedGeneration: cv.Generation,
		History: []configv1.UpdateHistory{{State: configv1.CompletedUpdate, Version: release.Version, Image: release.Image, StartedTime: now, CompletionTime: &now}},
	}
	if err := c.Status().Update(ctx, cv); err != nil {
		t.Fatal(err)
	}
	// The cluster's identity, which the deployer hands to the manager.
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	if err := c.Create(ctx, infra); err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "release-test-x7k2p", PlatformStatus: &configv1.PlatformStatus{Type: configv1.ExternalPlatformType},
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if err := c.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
}

// pod is a container of a Deployment run as a process, as the kubelet would
// run it: its command with the image's binary, its arguments and
// environment with $(VAR) and the downward API resolved, its service
// account's token, and its ports mapped to free ports of this machine (a
// pod has a network namespace of its own; the tests share one).
type pod struct {
	args  []string
	ports map[string]int // the container's port name -> the port it got
	probe *corev1.Probe
	// refused returns the requests of the pod the API server refused.
	refused func() []string
	log     string
	cmd     *exec.Cmd
	exit    chan error
}

func startPod(t *testing.T, cfg *rest.Config, c client.Client, d *appsv1.Deployment, binary string) *pod {
	t.Helper()
	ps := d.Spec.Template.Spec
	if len(ps.Containers) != 1 {
		t.Fatalf("%s has %d containers", d.Name, len(ps.Containers))
	}
	ctr := ps.Containers[0]

	// The service account's token, as the kubelet mounts it.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(d.Namespace).CreateToken(t.Context(), ps.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s: %v", ps.ServiceAccountName, err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa", Namespace: d.Namespace}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// The environment, from the container's env and the downward API.
	env := map[string]string{}
	var environ []string
	for _, e := range ctr.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
				v = d.Namespace
			default:
				t.Fatalf("env %s: a source the test cannot resolve: %+v", e.Name, f)
			}
		}
		env[e.Name] = v
		environ = append(environ, e.Name+"="+v)
	}
	environ = append(environ, "KUBECONFIG="+kubeconfig)
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	p := &pod{ports: map[string]int{}, probe: ctr.ReadinessProbe, exit: make(chan error, 1)}
	for _, a := range ctr.Args {
		a = expand.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		p.args = append(p.args, a)
	}
	// A flag whose value is an address on one of the container's ports
	// listens on that port's free port instead.
	byPort := map[string]string{}
	for _, port := range ctr.Ports {
		p.ports[port.Name] = freePort(t)
		byPort[strconv.Itoa(int(port.ContainerPort))] = port.Name
	}
	for i, a := range p.args {
		flag, addr, ok := strings.Cut(a, "=")
		if !ok {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err == nil && byPort[port] != "" {
			p.args[i] = fmt.Sprintf("%s=127.0.0.1:%d", flag, p.ports[byPort[port]])
		}
	}
	if len(ctr.Command) == 0 || ctr.Command[0] != "/machine-api-provider" {
		t.Fatalf("%s: command %v does not start the image's binary", d.Name, ctr.Command)
	}
	p.log = filepath.Join(t.TempDir(), d.Name+".log")
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(binary, append(slices.Clone(ctr.Command[1:]), p.args...)...)
	p.cmd.Env = environ
	p.cmd.Dir = "/"
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exit <- p.cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // the process this test started, by its PID
		<-p.exit
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("%s's log:\n%s", d.Name, tail(string(out), 60))
		}
	})
	t.Logf("started %s %s", ctr.Command[0], strings.Join(append(ctr.Command[1:], p.args...), " "))
	return p
}

// ready probes the pod as its readinessProbe says.
func (p *pod) ready() error {
	select {
	case err := <-p.exit:
		p.exit <- err
		return fmt.Errorf("the process exited: %v", err)
	default:
	}
	if p.probe == nil || p.probe.HTTPGet == nil {
		return fmt.Errorf("no HTTP readiness probe")
	}
	port, ok := p.ports[p.probe.HTTPGet.Port.StrVal]
	if !ok {
		return fmt.Errorf("the readiness probe's port %s is not the container's", p.probe.HTTPGet.Port.String())
	}
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, p.probe.HTTPGet.Path))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readiness: %s", resp.Status)
	}
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually polls cond until it holds, failing at once when the pod's
// process exits.
func eventually(t *testing.T, p *pod, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		if p.refused != nil {
			if refused := p.refused(); len(refused) > 0 {
				t.Fatalf("waiting for %s: the API server refused %s", what, strings.Join(refused, ", "))
			}
		}
		select {
		case err := <-p.exit:
			p.exit <- err
			t.Fatalf("waiting for %s: the process exited: %v", what, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	t.Fatalf("timed out after %s waiting for %s (last: %v)", timeout, what, last)
}

// audited counts the requests user made (authenticated as itself) and
// returns those the API server refused.
func audited(t *testing.T, path, user string) (int, []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var refused []string
	for line := range strings.Lines(string(data)) {
		var ev struct {
			Verb             string
			RequestURI       string `json:"requestURI"`
			User             struct{ Username string }
			ImpersonatedUser *struct{ Username string } `json:"impersonatedUser"`
			ResponseStatus   *struct{ Code int }        `json:"responseStatus"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.User.Username != user || ev.ImpersonatedUser != nil || ev.ResponseStatus == nil {
			continue
		}
		n++
		if ev.ResponseStatus.Code == http.StatusForbidden {
			refused = append(refused, ev.Verb+" "+ev.RequestURI)
		}
	}
	return n, refused
}

// monitoringCRDs stand in for the Prometheus operator's CRDs, which
// OpenShift has: the API server must serve the kinds to take the release's
// ServiceMonitor and PrometheusRule.
const monitoringCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names:
    kind: ServiceMonitor
    listKind: ServiceMonitorList
    plural: servicemonitors
    singular: servicemonitor
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names:
    kind: PrometheusRule
    listKind: PrometheusRuleList
    plural: prometheusrules
    singular: prometheusrule
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
