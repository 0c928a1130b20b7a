package deployer

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	testMAO      = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:aaaa"
	testProxy    = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:bbbb"
	testProvider = "ghcr.io/appuio/machine-api-provider:v1"
)

func testSpec() Spec {
	return Spec{
		Namespace:      "openshift-machine-api",
		Images:         Images{MachineAPIOperator: testMAO, KubeRBACProxy: testProxy},
		ImagesHash:     "cafe",
		ProviderImage:  testProvider,
		TokenSecret:    "cloudscale-token",
		ServiceAccount: "machine-api-controllers",
	}
}

func containerNames(cs []corev1.Container) []string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return n
}

func findContainer(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in %v", name, containerNames(cs))
	return corev1.Container{}
}

func argValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestDeploymentShape(t *testing.T) {
	d := Deployment(testSpec())
	if d.Name != "machine-api-controllers-cloudscale" || d.Namespace != "openshift-machine-api" || d.Name == OperatorDeploymentName {
		t.Fatalf("name = %s/%s", d.Namespace, d.Name)
	}
	if d.Labels[ManagedByLabel] != ManagedByValue {
		t.Errorf("labels = %v, want %s=%s", d.Labels, ManagedByLabel, ManagedByValue)
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d, want 1", *d.Spec.Replicas)
	}
	sel, err := labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := d.Spec.Template
	if !sel.Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("selector %v does not match the template's labels %v", sel, tmpl.Labels)
	}
	// The operator's Services select these.
	if tmpl.Labels["api"] != "clusterapi" || tmpl.Labels["k8s-app"] != "controller" {
		t.Errorf("template labels = %v, want api=clusterapi, k8s-app=controller", tmpl.Labels)
	}
	// ...but our selector must not take over the operator's pods.
	if sel.Matches(labels.Set{"api": "clusterapi", "k8s-app": "controller"}) {
		t.Errorf("selector %v matches the operator's pods", sel)
	}
	if tmpl.Annotations[ImagesHashAnnotation] != "cafe" {
		t.Errorf("template annotations = %v, want the images hash", tmpl.Annotations)
	}

	ps := tmpl.Spec
	if ps.PriorityClassName != "system-node-critical" {
		t.Errorf("priority class = %q", ps.PriorityClassName)
	}
	if v, ok := ps.NodeSelector["node-role.kubernetes.io/master"]; !ok || v != "" || len(ps.NodeSelector) != 1 {
		t.Errorf("node selector = %v", ps.NodeSelector)
	}
	if ps.ServiceAccountName != "machine-api-controllers" {
		t.Errorf("service account = %q", ps.ServiceAccountName)
	}
	tolerates := func(key string, effect corev1.TaintEffect) bool {
		return slices.ContainsFunc(ps.Tolerations, func(tol corev1.Toleration) bool {
			return tol.ToleratesTaint(&corev1.Taint{Key: key, Effect: effect})
		})
	}
	for _, taint := range []struct {
		key    string
		effect corev1.TaintEffect
	}{
		{"node-role.kubernetes.io/master", corev1.TaintEffectNoSchedule},
		{"CriticalAddonsOnly", corev1.TaintEffectNoSchedule},
		{"node.kubernetes.io/not-ready", corev1.TaintEffectNoExecute},
		{"node.kubernetes.io/unreachable", corev1.TaintEffectNoExecute},
	} {
		if !tolerates(taint.key, taint.effect) {
			t.Errorf("does not tolerate %s:%s", taint.key, taint.effect)
		}
	}

	want := []string{
		"machineset-controller", "machine-controller", "nodelink-controller", "machine-healthcheck-controller",
		"kube-rbac-proxy-machineset-mtrc", "kube-rbac-proxy-machine-mtrc", "kube-rbac-proxy-mhc-mtrc",
	}
	if got := containerNames(ps.Containers); !slices.Equal(got, want) {
		t.Fatalf("containers = %v, want %v", got, want)
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range ps.Containers {
		if c.Resources.Requests.Cpu().String() != "10m" || c.Resources.Requests.Memory().String() != "20Mi" {
			t.Errorf("%s: requests = %v, want 10m CPU and 20Mi", c.Name, c.Resources.Requests)
		}
		if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("%s: termination message policy %q", c.Name, c.TerminationMessagePolicy)
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s mounts volume %q, which the pod does not have", c.Name, m.Name)
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if p != nil && !ports[p.HTTPGet.Port.StrVal] {
				t.Errorf("%s probes port %q, which it does not have", c.Name, p.HTTPGet.Port.StrVal)
			}
		}
	}

	for _, tc := range []struct {
		name, image, command string
		args                 map[string]string
		ports                map[string]int32
	}{
		{
			name: "machineset-controller", image: testMAO, command: "/machineset-controller",
			args: map[string]string{
				"--namespace": "openshift-machine-api", "--leader-elect": "true", "--leader-elect-lease-duration": "120s",
				"--metrics-bind-address": "127.0.0.1:8082", "--feature-gates": "MachineAPIMigration=false",
			},
			ports: map[string]int32{"webhook-server": 8443, "ms-healthz": 9441},
		},
		{
			name: "machine-controller", image: testProvider, command: "/machine-api-provider manager",
			args: map[string]string{
				"--namespace": "openshift-machine-api", "--leader-elect": "true",
				"--metrics-bind-address": "127.0.0.1:8081", "--health-probe-bind-address": ":9440",
			},
			ports: map[string]int32{"machine-healthz": 9440},
		},
		{
			name: "nodelink-controller", image: testMAO, command: "/nodelink-controller",
			args: map[string]string{"--namespace": "openshift-machine-api", "--leader-elect": "true", "--leader-elect-lease-duration": "120s"},
		},
		{
			name: "machine-healthcheck-controller", image: testMAO, command: "/machine-healthcheck",
			args: map[string]string{
				"--namespace": "openshift-machine-api", "--leader-elect": "true", "--leader-elect-lease-duration": "120s",
				"--metrics-bind-address": "127.0.0.1:8083",
			},
			ports: map[string]int32{"mhc-healthz": 9442},
		},
	} {
		c := findContainer(t, ps.Containers, tc.name)
		if c.Image != tc.image {
			t.Errorf("%s: image %q, want %q", tc.name, c.Image, tc.image)
		}
		if got := strings.Join(c.Command, " "); got != tc.command {
			t.Errorf("%s: command %q, want %q", tc.name, got, tc.command)
		}
		for flag, v := range tc.args {
			if got, ok := argValue(c.Args, flag); !ok || got != v {
				t.Errorf("%s: %s = %q (set: %t), want %q; args %v", tc.name, flag, got, ok, v, c.Args)
			}
		}
		if len(c.Ports) != len(tc.ports) {
			t.Errorf("%s: ports %v, want %v", tc.name, c.Ports, tc.ports)
		}
		for _, p := range c.Ports {
			if tc.ports[p.Name] != p.ContainerPort {
				t.Errorf("%s: port %s=%d, want %v", tc.name, p.Name, p.ContainerPort, tc.ports)
			}
		}
	}

	// The proxies publish each loopback metrics endpoint under the port
	// names the operator's machine-api-controllers Service targets.
	for _, tc := range []struct {
		portName string
		port     int32
		upstream string
	}{
		{"machineset-mtrc", 8442, "http://127.0.0.1:8082/"},
		{"machine-mtrc", 8441, "http://127.0.0.1:8081/"},
		{"mhc-mtrc", 8444, "http://127.0.0.1:8083/"},
	} {
		c := findContainer(t, ps.Containers, "kube-rbac-proxy-"+tc.portName)
		if c.Image != testProxy {
			t.Errorf("%s: image %q", c.Name, c.Image)
		}
		if len(c.Ports) != 1 || c.Ports[0].Name != tc.portName || c.Ports[0].ContainerPort != tc.port {
			t.Errorf("%s: ports %v, want %s=%d", c.Name, c.Ports, tc.portName, tc.port)
		}
		if v, _ := argValue(c.Args, "--upstream"); v != tc.upstream {
			t.Errorf("%s: upstream %q, want %q", c.Name, v, tc.upstream)
		}
		if v, _ := argValue(c.Args, "--secure-listen-address"); !strings.HasSuffix(v, ":"+strconv.Itoa(int(tc.port))) {
			t.Errorf("%s: listens on %q, want port %d", c.Name, v, tc.port)
		}
		for _, flag := range []string{"--config-file", "--tls-cert-file", "--tls-private-key-file", "--tls-cipher-suites"} {
			if _, ok := argValue(c.Args, flag); !ok {
				t.Errorf("%s: no %s", c.Name, flag)
			}
		}
	}

	// The provider's default token: read by the manager from the secret
	// at every use (a rotated token needs no restart), never handed over
	// as environment, which would keep the value the pod started with.
	mc := findContainer(t, ps.Containers, "machine-controller")
	for _, e := range mc.Env {
		if e.Name == "CLOUDSCALE_API_TOKEN" || e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("environment %s = %+v: the manager reads its default credentials from the secret", e.Name, e)
		}
		if e.Name == "CLOUDSCALE_API_URL" {
			t.Errorf("CLOUDSCALE_API_URL set: the deployer hands its own options on as flags")
		}
	}
	if v, _ := argValue(mc.Args, "--default-credentials-secret"); v != "cloudscale-token" {
		t.Errorf("--default-credentials-secret %q in %v, want cloudscale-token", v, mc.Args)
	}

	// The cluster's trust bundle is mounted and in Go's search path.
	var mounted bool
	for _, m := range mc.VolumeMounts {
		if m.Name == "trusted-ca" {
			mounted = true
			if !slices.ContainsFunc(mc.Env, func(e corev1.EnvVar) bool {
				return e.Name == "SSL_CERT_DIR" && slices.Contains(strings.Split(e.Value, ":"), m.MountPath)
			}) {
				t.Errorf("trusted CA bundle at %s, not in SSL_CERT_DIR: %v", m.MountPath, mc.Env)
			}
		}
	}
	if !mounted {
		t.Errorf("machine-controller does not mount the trusted CA bundle")
	}
}

func TestDeploymentOptions(t *testing.T) {
	s := testSpec()
	s.WithoutMachineHealthCheck = true
	s.Own = map[string]string{"cloudscale-api-url": "http://emulator:8282/", "boot-images-mirror": "https://mirror.example/rhcos"}
	s.Namespace = "elsewhere"
	ps := Deployment(s).Spec.Template.Spec
	want := []string{"machineset-controller", "machine-controller", "nodelink-controller", "kube-rbac-proxy-machineset-mtrc", "kube-rbac-proxy-machine-mtrc"}
	if got := containerNames(ps.Containers); !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	// The deployer's own options are the manager's flags, after the
	// others it sets, in OwnFlags' order.
	mc := findContainer(t, ps.Containers, "machine-controller")
	if got, want := mc.Args[len(mc.Args)-2:], []string{"--cloudscale-api-url=http://emulator:8282/", "--boot-images-mirror=https://mirror.example/rhcos"}; !slices.Equal(got, want) {
		t.Errorf("args = %v, want them to end in %v", mc.Args, want)
	}
	s.Cloud, s.Own = "exoscale", map[string]string{"exoscale-api-endpoint": "http://emulator:8383/v2"}
	mc = findContainer(t, Deployment(s).Spec.Template.Spec.Containers, "machine-controller")
	if v, _ := argValue(mc.Args, "--exoscale-api-endpoint"); v != "http://emulator:8383/v2" {
		t.Errorf("args = %v, want --exoscale-api-endpoint", mc.Args)
	}
	if _, ok := argValue(mc.Args, "--boot-images-mirror"); ok {
		t.Errorf("args = %v: a mirror without the option", mc.Args)
	}
	for _, c := range ps.Containers[:3] {
		if v, _ := argValue(c.Args, "--namespace"); v != "elsewhere" {
			t.Errorf("%s: --namespace=%q", c.Name, v)
		}
	}
}

func TestApplyConfigurationClaimsNoStatus(t *testing.T) {
	ac, err := deploymentApplyConfiguration(Deployment(testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["status"]; ok {
		t.Errorf("apply configuration has a status: %s", raw)
	}
	if m["kind"] != "Deployment" || m["apiVersion"] != "apps/v1" {
		t.Errorf("kind/apiVersion = %v/%v", m["kind"], m["apiVersion"])
	}
	if strings.Contains(string(raw), "creationTimestamp") {
		t.Errorf("apply configuration sets a creationTimestamp: %s", raw)
	}
}

func TestParseImages(t *testing.T) {
	im, err := ParseImages(`{"machineAPIOperator": "mao@sha256:1", "kubeRBACProxy": "proxy@sha256:2", "clusterAPIControllerAWS": "aws"}`)
	if err != nil || im.MachineAPIOperator != "mao@sha256:1" || im.KubeRBACProxy != "proxy@sha256:2" {
		t.Errorf("ParseImages = %+v, %v", im, err)
	}
	for data, wantErr := range map[string]string{
		`{`:                           "not valid JSON",
		`{"kubeRBACProxy": "p"}`:      "machineAPIOperator",
		`{"machineAPIOperator": "m"}`: "kubeRBACProxy",
		`{}`:                          "machineAPIOperator and kubeRBACProxy",
		`{"machineAPIOperator": " ", "kubeRBACProxy": "p"}`: "machineAPIOperator",
	} {
		if _, err := ParseImages(data); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseImages(%s) = %v, want an error about %s", data, err, wantErr)
		}
	}
	a, b := `{"machineAPIOperator": "m1"}`, `{"machineAPIOperator": "m2"}`
	if HashImages(a) == HashImages(b) || HashImages(a) != HashImages(strings.Clone(a)) || len(HashImages(a)) != 64 {
		t.Errorf("HashImages(%s) = %s, HashImages(%s) = %s: want distinct SHA-256 digests", a, HashImages(a), b, HashImages(b))
	}
}
