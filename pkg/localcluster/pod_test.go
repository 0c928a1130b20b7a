package localcluster

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/appuio/machine-api-provider/pkg/testenv"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "NS": "openshift-machine-api"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"--namespace=$(NS)": "--namespace=openshift-machine-api",
		"$(A)$(A)":          "aa",
		"$(MISSING)":        "$(MISSING)",
		"$$(A)":             "$(A)",
		"cost: $5":          "cost: $5",
		"$(A":               "$(A",
		"end$":              "end$",
	} {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// RunPod runs a pod's containers as the kubelet would: exactly their
// command and arguments ($(VAR) expanded), env from a Secret, a ConfigMap
// and the downward API, Secret and ConfigMap volumes, a token of the pod's
// service account that the API server takes for that account, readiness
// probes; a container that ends is started again after the back-off, with
// its exit code and its last output as the termination message; a
// container whose image has no binary is skipped.
func TestRunPod(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary and starts an API server")
	}
	bin, cfg, cs := podprobeEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "pods"
	for _, err := range []error{
		create(ctx, cs.CoreV1().Secrets(ns).Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"a": "secret-a"}}),
		create(ctx, cs.CoreV1().ConfigMaps(ns).Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	ip, err := HostIP()
	if err != nil {
		t.Fatal(err)
	}
	env := []corev1.EnvVar{
		{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "a"}}},
		{Name: "FROM_FIELD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "FROM_CONFIGMAP", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}},
		{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "a", Optional: ptr.To(true)}}},
		{Name: "EXPANDED", Value: "ns=$(FROM_FIELD)"},
		{Name: "PORT", Value: strconv.Itoa(port)},
	}
	mounts := []corev1.VolumeMount{{Name: "secret", MountPath: "/etc/secret"}, {Name: "config", MountPath: "/etc/config"}}
	pod := PodFromTemplate(ns, "probe", corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		ServiceAccountName: "runner",
		Containers: []corev1.Container{
			{
				Name: "server", Image: "podprobe:1", Command: []string{"/podprobe"}, Args: []string{"serve", "--in=$(FROM_FIELD)"},
				Env: env, VolumeMounts: mounts,
				Ports:          []corev1.ContainerPort{{Name: "health", ContainerPort: int32(port)}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}}, PeriodSeconds: 1},
			},
			{
				// a name, not a path: found as in the image's PATH
				Name: "crasher", Image: "podprobe:1", Command: []string{"podprobe"}, Args: []string{"crash"},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			},
			{
				// its env names a Secret that comes later: not created
				// until then, and no restart counted
				Name: "waiter", Image: "podprobe:1", Command: []string{"/podprobe"}, Args: []string{"serve"},
				Env: []corev1.EnvVar{{Name: "LATE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "late"}, Key: "a"}}},
					{Name: "PORT", Value: strconv.Itoa(freePort(t))}},
			},
			{Name: "sidecar", Image: "registry.example/sidecar:1"},
		},
		Volumes: []corev1.Volume{
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		},
	}})
	dir := t.TempDir()
	p, err := RunPod(ctx, cfg, pod, PodOptions{Images: map[string]string{"podprobe:1": bin}, Dir: dir, HostIP: ip, RestartBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()

	status := func(name string) ContainerStatus {
		for _, s := range p.Statuses() {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no container %s", name)
		return ContainerStatus{}
	}
	for deadline := time.Now().Add(time.Minute); ; {
		if status("server").Ready && status("crasher").Restarts >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the server ready and the crasher restarted twice:\n%s", p.Describe())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p.Ready() {
		t.Error("the pod is Ready while a container crashes")
	}
	if s := status("waiter"); s.Running || s.Restarts != 0 || !strings.HasPrefix(s.Waiting, "CreateContainerConfigError") {
		t.Errorf("the container whose Secret is missing: %+v, want waiting in CreateContainerConfigError, no restarts", s)
	}
	if err := create(ctx, cs.CoreV1().Secrets(ns).Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late"}, StringData: map[string]string{"a": "x"}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !status("waiter").Ready; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the container did not start once its Secret was there:\n%s", p.Describe())
		}
	}
	if s := status("waiter"); s.Restarts != 0 {
		t.Errorf("the container whose Secret came late counts %d restarts, want 0", s.Restarts)
	}
	if s := status("sidecar"); !s.Skipped || !s.Ready {
		t.Errorf("the sidecar without a binary: %+v, want skipped and counted ready", s)
	}
	if got := p.Skipped(); len(got) != 1 || got[0] != "sidecar" {
		t.Errorf("Skipped() = %v", got)
	}
	crash := status("crasher").Exits[0]
	if crash.Code != 3 || crash.Reason != "Error" || !strings.Contains(crash.Message, "the last words") {
		t.Errorf("the crasher's exit: %+v, want code 3 with its last output", crash)
	}
	if !strings.HasPrefix(crash.Head, "env FROM_SECRET=\n") || strings.Count(crash.Head, "\n") != 5 {
		t.Errorf("the crasher's exit: the start of its output is %q, want its first 5 lines", crash.Head)
	}
	log, err := os.ReadFile(filepath.Join(dir, "probe", "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"env FROM_SECRET=secret-a", "env FROM_FIELD=pods", "env FROM_CONFIGMAP=v", "env EXPANDED=ns=pods", "env HOSTNAME=probe",
		"file /etc/secret/a=secret-a", "file /etc/config/k=v", "file /var/run/secrets/kubernetes.io/serviceaccount/namespace=pods",
		`args ["serve" "--in=pods"]`,
		"user system:serviceaccount:pods:runner",
	} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the server's output lacks %q:\n%s", want, log)
		}
	}
	p.Stop()
	if s := status("server"); s.Running || len(s.Exits) != 1 || s.Exits[0].Reason != "Killed" {
		t.Errorf("after Stop the server is %+v, want ended, killed", s)
	}
}

func create[T any](ctx context.Context, f func(context.Context, T, metav1.CreateOptions) (T, error), obj T) error {
	_, err := f(ctx, obj, metav1.CreateOptions{})
	return err
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPodsNeverCollideOnPorts: pods listen on the ports their manifests
// fix, whatever else on this machine holds them: two pods that serve on the
// same port run side by side, beside a process of this machine already
// listening on it, each Ready, each reached at its own IP, each reaching
// the API server.
func TestPodsNeverCollideOnPorts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary and starts an API server")
	}
	if !isolatedNetworks() {
		t.Skip("pods get a network of their own only when the runner is root")
	}
	bin, cfg, _ := podprobeEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "pods"
	ip, err := HostIP()
	if err != nil {
		t.Fatal(err)
	}
	// Something of this machine holds the port on every address.
	taken, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	var pods []*Pod
	for _, name := range []string{"one", "two"} {
		pod := PodFromTemplate(ns, name, corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			ServiceAccountName: "runner",
			Containers: []corev1.Container{{
				Name: "server", Image: "podprobe:1", Command: []string{"/podprobe"}, Args: []string{"serve"},
				Env:            []corev1.EnvVar{{Name: "PORT", Value: strconv.Itoa(port)}},
				Ports:          []corev1.ContainerPort{{Name: "health", ContainerPort: int32(port)}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}}, PeriodSeconds: 1},
			}},
		}})
		p, err := RunPod(ctx, cfg, pod, PodOptions{Images: map[string]string{"podprobe:1": bin}, Dir: t.TempDir(), HostIP: ip, RestartBackoff: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Stop()
		pods = append(pods, p)
	}
	for deadline := time.Now().Add(time.Minute); !pods[0].Ready() || !pods[1].Ready(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pods are not Ready:\none: %s\ntwo: %s", pods[0].Describe(), pods[1].Describe())
		}
	}
	if pods[0].IP() == pods[1].IP() || pods[0].IP() == ip {
		t.Errorf("pod IPs %s and %s (this machine's %s): want one of its own each", pods[0].IP(), pods[1].IP(), ip)
	}
	for _, p := range pods {
		res, err := http.Get("http://" + net.JoinHostPort(p.IP(), strconv.Itoa(port)) + "/healthz")
		if err != nil {
			t.Fatalf("pod %s at %s: %v", p.Name, p.IP(), err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("pod %s at %s: HTTP %d", p.Name, p.IP(), res.StatusCode)
		}
		if s := p.Statuses()[0]; s.Restarts != 0 {
			t.Errorf("pod %s: %d restarts:\n%s", p.Name, s.Restarts, p.Describe())
		}
	}
	log, err := os.ReadFile(filepath.Join(pods[0].dir, "server.log"))
	if err != nil || !strings.Contains(string(log), "user system:serviceaccount:pods:runner") {
		t.Errorf("the pod did not reach the API server (%v):\n%s", err, log)
	}
	ipOne := pods[0].IP()
	pods[0].Stop()
	if _, err := net.DialTimeout("tcp", net.JoinHostPort(ipOne, strconv.Itoa(port)), time.Second); err == nil {
		t.Errorf("a stopped pod's port at %s still answers", ipOne)
	}
}

// podprobeEnv builds testdata/podprobe into the directory that plays its
// image, and starts an API server with the namespace "pods" and its
// service account "runner".
func podprobeEnv(t *testing.T) (bin string, cfg *rest.Config, cs kubernetes.Interface) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "image")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "podprobe"), "./testdata/podprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/podprobe: %v\n%s", err, out)
	}
	cfg, _ = testenv.Start(t)
	cs = kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	for _, err := range []error{
		create(ctx, cs.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pods"}}),
		create(ctx, cs.CoreV1().ServiceAccounts("pods").Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return bin, cfg, cs
}
