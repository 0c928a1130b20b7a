package manifests_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestReleaseRequestsWithTheirRBAC makes, against a real API server with
// nothing but each install's RBAC, every request the release table says a
// release's controllers or its deployer make (deployer.Releases:
// ControllerPermissions, DeployerPermissions), as the service account the
// Deployment rendered for that release runs as, and as the deployer: the
// events.k8s.io Events and the read of the APIServer named cluster of 4.22
// to 5.0, the core Events and status updates of the older ones. None may
// be refused, and the audit log holds no 403 of either account.
//
// The controllers of 4.22, 4.23 and 5.0 cannot run here (the Go module
// proxy serves none of their code); what they request was read from their
// release branches into the table (releases.go). This test is what stands
// for "their Deployment under config/ RBAC gets 0 refused requests";
// `make matrix` shows it with the real binaries of the older eras.
func TestReleaseRequestsWithTheirRBAC(t *testing.T) {
	for _, k := range installs {
		t.Run(strings.ReplaceAll(k, "/", "-"), func(t *testing.T) { releaseRequestsWithTheirRBAC(t, k) })
	}
}

func releaseRequestsWithTheirRBAC(t *testing.T, dir string) {
	cfg, c, a, objs := setup(t, dir, testenv.WithCRDs(testenv.APIServerCRD(t)))
	ctx := context.Background()
	createAPIServer(t, c)
	// the objects the controllers write the status of
	if err := c.Create(ctx, &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "workers-a", Namespace: Namespace}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &machinev1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: Namespace}}); err != nil {
		t.Fatal(err)
	}
	admin := dynamicFor(t, cfg)
	// an Event of each API to patch (a series, as the recorders do); the
	// two APIs are one store, so the names differ
	for group := range eventAPIs {
		if _, err := admin.Resource(eventAPIs[group]).Namespace(Namespace).Create(ctx, event(group, seenEvent(group)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("an Event of %q: %v", group, err)
		}
	}

	controllers := controllersSA(t, objs)
	done := map[string]bool{}
	var made int
	for _, rel := range deployer.Releases {
		// the service account the Deployment rendered for rel runs as
		sa := deployer.Deployment(deployer.Spec{Namespace: Namespace, ServiceAccount: controllers, Release: rel, Cloud: cloudOf(t, objs)}).
			Spec.Template.Spec.ServiceAccountName
		for _, who := range []struct {
			sa    string
			perms []deployer.Permission
		}{{sa, rel.ControllerPermissions()}, {DeployerSA, rel.DeployerPermissions()}} {
			as := dynamicFor(t, impersonate(cfg, who.sa))
			for _, p := range who.perms {
				key := fmt.Sprintf("%s %s %q %s %s", who.sa, p.Verb, p.Group, p.Resource, p.Name)
				if done[key] {
					continue
				}
				done[key] = true
				made++
				if err := makeRequest(ctx, as, p); err != nil {
					t.Errorf("OpenShift %s: %s: %v (%s)", rel, key, err, p.Why)
				}
			}
		}
	}
	if !done[controllers+` create "events.k8s.io" events `] || !done[DeployerSA+` watch "config.openshift.io" apiservers `+deployer.APIServerName] {
		t.Fatalf("the release table records no events.k8s.io Events or APIServer watch: %v", done)
	}
	for _, sa := range []string{controllers, DeployerSA} {
		for _, r := range a.requests(t, sa) {
			if r.code == 403 {
				t.Errorf("%s was refused: %s", sa, r)
			}
		}
	}
	t.Logf("%d distinct requests of the release table made", made)
}

// createAPIServer creates the APIServer named cluster with the Intermediate
// TLS profile, as a cluster has it.
func createAPIServer(t *testing.T, c client.Client) {
	t.Helper()
	apiServer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
		"metadata": map[string]any{"name": deployer.APIServerName},
		"spec":     map[string]any{"tlsSecurityProfile": map[string]any{"type": "Intermediate", "intermediate": map[string]any{}}},
	}}
	if err := c.Create(context.Background(), apiServer); err != nil {
		t.Fatal(err)
	}
}

func dynamicFor(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// eventAPIs are the two Event APIs by group: core v1 (record.EventRecorder,
// up to 4.21) and events.k8s.io/v1 (controller-runtime 0.23's recorder,
// from 4.22).
var eventAPIs = map[string]schema.GroupVersionResource{
	"":              {Version: "v1", Resource: "events"},
	"events.k8s.io": {Group: "events.k8s.io", Version: "v1", Resource: "events"},
}

// seenEvent names the Event of the API of group that the test patches.
func seenEvent(group string) string {
	return "seen-" + strings.ReplaceAll(cmp.Or(group, "core"), ".", "-")
}

// event is an Event of the API of group about the MachineSet, named name,
// as the controllers' recorders write it.
func event(group, name string) *unstructured.Unstructured {
	now := metav1.NewMicroTime(time.Now())
	regarding := map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "namespace": Namespace, "name": "workers"}
	meta := map[string]any{"name": name, "namespace": Namespace}
	if group == "" {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": meta,
			"involvedObject": regarding, "reason": "SuccessfulCreate", "message": "Created machine", "type": "Normal",
			"source": map[string]any{"component": "machineset-controller"}, "count": int64(1)}}
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": meta,
		"regarding": regarding, "reason": "SuccessfulCreate", "note": "Created machine", "type": "Normal", "action": "Create",
		"eventTime": now.Format(metav1.RFC3339Micro), "reportingController": "machineset-controller", "reportingInstance": "machineset-controller-1"}}
}

// makeRequest makes the request p describes: the verb on an object of p's
// resource that the test made before (a Machine, a MachineSet, an Event of
// each API, the APIServer named cluster), or a new one for create.
func makeRequest(ctx context.Context, d dynamic.Interface, p deployer.Permission) error {
	resource, sub, _ := strings.Cut(p.Resource, "/")
	var subresources []string
	if sub != "" {
		subresources = []string{sub}
	}
	var ri dynamic.ResourceInterface
	var name string
	var patch string
	switch p.Group + "/" + resource {
	case "/events", "events.k8s.io/events":
		ri = d.Resource(eventAPIs[p.Group]).Namespace(Namespace)
		name, patch = seenEvent(p.Group), `{"count":2}`
		if p.Group != "" {
			series, _ := json.Marshal(map[string]any{"series": map[string]any{"count": 2, "lastObservedTime": metav1.NewMicroTime(time.Now())}})
			patch = string(series)
		}
	case "machine.openshift.io/machines":
		ri = d.Resource(machinev1.GroupVersion.WithResource(resource)).Namespace(Namespace)
		name, patch = "workers-a", `{"status":{"phase":"Provisioning"}}`
	case "machine.openshift.io/machinesets":
		ri = d.Resource(machinev1.GroupVersion.WithResource(resource)).Namespace(Namespace)
		name, patch = "workers", `{"status":{"replicas":0}}`
	case "config.openshift.io/apiservers":
		ri = d.Resource(schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: resource})
		name = deployer.APIServerName
	default:
		return fmt.Errorf("the test makes no request on %q %s: teach it (makeRequest)", p.Group, p.Resource)
	}
	if p.Name != "" && p.Name != name {
		return fmt.Errorf("the test's object is named %s, the table's %s", name, p.Name)
	}
	list := metav1.ListOptions{}
	if p.Name != "" {
		list.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.Name).String()
	}
	var err error
	switch p.Verb {
	case "create":
		if resource != "events" {
			return fmt.Errorf("the test creates only Events, not %s", p.Resource)
		}
		_, err = ri.Create(ctx, event(p.Group, fmt.Sprintf("made-%d", time.Now().UnixNano())), metav1.CreateOptions{})
	case "patch":
		_, err = ri.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, subresources...)
	case "update":
		var u *unstructured.Unstructured
		if u, err = ri.Get(ctx, name, metav1.GetOptions{}); err != nil {
			break
		}
		if sub == "status" {
			_, err = ri.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		} else {
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
		}
	case "get":
		_, err = ri.Get(ctx, name, metav1.GetOptions{}, subresources...)
	case "list":
		_, err = ri.List(ctx, list)
	case "watch":
		var w interface{ Stop() }
		if w, err = ri.Watch(ctx, list); err == nil {
			w.Stop()
		}
	default:
		return fmt.Errorf("the test knows no verb %s: teach it (makeRequest)", p.Verb)
	}
	return err
}
