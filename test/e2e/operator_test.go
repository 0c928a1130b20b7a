package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// The cluster-autoscaler runs as the operator rendered it: its Deployment
// is the ClusterAutoscaler's (controller reference), with the flags the
// ClusterAutoscaler asks for; and the process running is
// bin/cluster-autoscaler with exactly the container's command, arguments
// and environment (plus only what a kubelet adds), authenticated as the
// Deployment's service account.
func assertAutoscalerAsRendered(t *testing.T, e *demo.Env) {
	t.Helper()
	ctx := context.Background()
	d, err := e.AutoscalerDeploymentObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(d); ref == nil || ref.Kind != "ClusterAutoscaler" || ref.Name != demo.ClusterAutoscalerName {
		t.Errorf("Deployment %s is controlled by %v, want the ClusterAutoscaler %s", d.Name, ref, demo.ClusterAutoscalerName)
	}
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.Name, n)
	}
	c := d.Spec.Template.Spec.Containers[0]
	// What the ClusterAutoscaler says, as the operator renders it.
	for _, want := range []string{
		"--cloud-provider=clusterapi", "--namespace=" + demo.Namespace,
		"--scale-down-enabled=true",
		"--scale-down-delay-after-add=" + e.Options.ScaleDownDelayAfterAdd.String(),
		"--scale-down-unneeded-time=" + e.Options.ScaleDownUnneeded.String(),
		"--scale-down-delay-after-delete=0s", "--scale-down-delay-after-failure=10s",
		"--max-node-provision-time=5m", "--max-nodes-total=24", "--skip-nodes-with-local-storage=false",
		"--expander=least-waste", "--v=2",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("the rendered cluster-autoscaler has no %s: %q", want, c.Args)
		}
	}

	// The process of the Deployment's current pod: the operator may roll
	// the Deployment once more right after its first render (the pod of
	// the first one is then killed at once), so the pod is looked up until
	// its process runs as the Deployment says, for a minute.
	var proc int
	var argv, want []string
	deadline := time.Now().Add(time.Minute)
	for {
		d, err = e.AutoscalerDeploymentObject(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c = d.Spec.Template.Spec.Containers[0]
		want = append(slices.Clone(c.Command), c.Args...)
		pod, perr := e.AutoscalerPod()
		if perr == nil {
			proc, err = containerProcess(filepath.Join(e.PodsDir(), pod.Name, c.Name, "root"))
			if err == nil {
				argv, err = procStrings(proc, "cmdline")
			}
		} else {
			err = perr
		}
		if err == nil && slices.Equal(argv, want) {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("the cluster-autoscaler's process: %v\n%s", err, e.Pods())
			}
			t.Fatalf("the cluster-autoscaler runs as\n  %q\nits Deployment says\n  %q", argv, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
	environ, err := procStrings(proc, "environ")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, v := range c.Env {
		if v.ValueFrom != nil {
			continue
		}
		if got, ok := env[v.Name]; !ok || got != v.Value {
			t.Errorf("the cluster-autoscaler's %s is %q, its Deployment says %q", v.Name, got, v.Value)
		}
		delete(env, v.Name)
	}
	for k := range env {
		// What a kubelet adds (the API server's Service, the hostname)
		// and the image's PATH.
		if !strings.HasPrefix(k, "KUBERNETES_") && k != "HOSTNAME" && k != "PATH" {
			t.Errorf("the cluster-autoscaler has %s in its environment, which its Deployment does not set", k)
		}
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fileSum(t, filepath.Join("/proc", fmt.Sprint(proc), "exe")), fileSum(t, filepath.Join(bin, "cluster-autoscaler")); got != want {
		t.Errorf("the cluster-autoscaler's executable is not bin/cluster-autoscaler (sha256 %s, want %s)", got, want)
	}

	// Its identity: the token it was given is its service account's.
	token, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(proc), "root/var/run/secrets/kubernetes.io/serviceaccount/token"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(e.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(bytes.TrimSpace(token))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + demo.Namespace + ":" + d.Spec.Template.Spec.ServiceAccountName; review.Status.User.Username != want {
		t.Errorf("the cluster-autoscaler authenticates as %q, want %q", review.Status.User.Username, want)
	}
}

// The operator's admission webhook is served, through its Service: a
// MachineAutoscaler whose maximum is below its minimum is refused with the
// operator's own words (the CRD's schema alone would take it).
func assertWebhookRefuses(t *testing.T, e *demo.Env) {
	t.Helper()
	bad := demo.MachineAutoscaler(e.MachineSetName, 3, 1)
	bad.SetName("upside-down")
	err := e.Client.Create(context.Background(), bad)
	if err == nil {
		_ = e.Client.Delete(context.Background(), bad)
		t.Fatal("a MachineAutoscaler of 3 to 1 Machines was accepted: the cluster-autoscaler-operator's webhook was not called")
	}
	if !strings.Contains(err.Error(), "max replicas must be greater than or equal to min") {
		t.Fatalf("a MachineAutoscaler of 3 to 1 Machines: %v; want the operator's webhook to refuse it", err)
	}
}

// The operator wrote the MachineSet's bounds: they name their
// MachineAutoscaler, the field manager of the annotations is the operator,
// and when someone changes them, it puts them back.
func assertBoundsByOperator(t *testing.T, e *demo.Env) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: demo.Namespace, Name: e.MachineSetName}
	var ms machinev1.MachineSet
	if err := e.Client.Get(ctx, key, &ms); err != nil {
		t.Fatal(err)
	}
	if got, want := ms.Annotations[demo.MachineAutoscalerOwnerAnnotation], demo.Namespace+"/"+e.MachineSetName; got != want {
		t.Errorf("the MachineSet's %s is %q, want %q", demo.MachineAutoscalerOwnerAnnotation, got, want)
	}
	field := `"f:` + demo.MaxSizeAnnotation + `"`
	var managers []string
	for _, f := range ms.ManagedFields {
		if f.FieldsV1 != nil && strings.Contains(string(f.FieldsV1.Raw), field) {
			managers = append(managers, f.Manager)
		}
	}
	if !slices.Equal(managers, []string{"cluster-autoscaler-operator"}) {
		t.Errorf("the MachineSet's bounds were written by %q, want the cluster-autoscaler-operator alone", managers)
	}

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+demo.MaxSizeAnnotation+`":"9"}}}`))
	if err := e.Client.Patch(ctx, &ms, patch); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := e.Client.Get(ctx, key, &ms); err != nil {
			t.Fatal(err)
		}
		if ms.Annotations[demo.MaxSizeAnnotation] == "4" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MachineSet's maximum, set to 9 by hand, is still %q after a minute; the operator should have put back 4", ms.Annotations[demo.MaxSizeAnnotation])
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// containerProcess finds the process chrooted into root: the pod runner
// runs each container in <Dir>/<pod>/<container>/root.
func containerProcess(root string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if r, err := os.Readlink(filepath.Join("/proc", d.Name(), "root")); err == nil && r == root {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d processes run in %s, want 1", len(found), root)
	}
	return found[0], nil
}

// No request of the operator's or the autoscaler's was refused: the RBAC
// of the operator's manifests is all they needed.
func assertNoneRefused(t *testing.T, e *demo.Env) {
	t.Helper()
	refused, total, err := e.RefusedRequests()
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 {
		t.Fatal("the audit log has no request of the cluster-autoscaler-operator or the cluster-autoscaler")
	}
	for _, r := range refused {
		t.Errorf("refused (403): %s", r)
	}
	t.Logf("%d requests of the cluster-autoscaler-operator and the cluster-autoscaler, %d distinct refused", total, len(refused))
}

// procStrings reads a NUL-separated /proc/<pid>/ file.
func procStrings(pid int, name string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), name))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00"), nil
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
