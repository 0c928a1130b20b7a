// Package install_test installs the provider into a new cluster the way
// the OpenShift installer does with the files `machine-api-provider
// install-manifests` writes into its openshift/ directory: every file
// created in no particular order, failures retried, until the worker and
// infra MachineSets have Running Machines linked to their Nodes. The
// control plane is the local one of pkg/demo, with the provider's manager
// standing in for the Deployment the deployer would run (pods run nowhere
// here). `make e2e` runs it (E2E=1).
package install_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/installmanifests"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/pkg/userdata"
	"github.com/appuio/machine-api-provider/test/fixture"
)

func TestMain(m *testing.M) {
	userdata.Main()
	ctrllog.SetLogger(funcr.New(func(string, string) {}, funcr.Options{}))
	os.Exit(m.Run())
}

// workerIgnition is what the installer's worker-user-data holds: the
// pointer to the machine config server, with the CA it had at install
// time.
const workerIgnition = `{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]},` +
	`"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,SU5TVEFMTC1USU1FLUNB"}]}}}}`

// managedIgnition is the machine-config-operator's worker-user-data-managed
// (pkg/operator/sync.go, manifests/userdata_secret.yaml), once it has
// rotated the CA: the provider takes the CA from it.
const (
	rotatedCA       = "data:text/plain;charset=utf-8;base64,Uk9UQVRFRC1DQQ=="
	managedIgnition = `{"ignition":{"version":"3.5.0","config":{"merge":[{"source":"https://api-int.c1.example.com:22623/config/worker"}]},` +
		`"security":{"tls":{"certificateAuthorities":[{"source":"` + rotatedCA + `"}]}}}}`
)

func TestInstallManifests(t *testing.T) {
	for _, tc := range []struct {
		cloud string
		c     cloud.Cloud
		spec  map[string]any
	}{
		{demo.Cloudscale, cscloud.New(cscloud.Options{DefaultToken: "unused"}), map[string]any{"zone": "rma1", "flavor": "flex-8-4", "image": "custom:rhcos-4.19", "rootVolumeSizeGB": 50, "interfaces": []any{map[string]any{"type": "Public"}}}},
		{demo.Exoscale, exocloud.New(exocloud.Options{DefaultAPIKey: "unused", DefaultAPISecret: "unused"}), map[string]any{"zone": "ch-gva-2", "instanceType": "standard.large", "template": map[string]any{"name": "rhcos-4.19"}, "diskSize": 50}},
	} {
		t.Run(tc.cloud, func(t *testing.T) {
			testInstall(t, tc.cloud, tc.c, tc.spec)
		})
	}
}

func testInstall(t *testing.T, cloudName string, c cloud.Cloud, spec map[string]any) {
	if os.Getenv("E2E") == "" {
		t.Skip("end-to-end test: run `make e2e` (E2E=1)")
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := funcr.New(func(string, string) {}, funcr.Options{})
	e, err := demo.Start(demo.Options{Cloud: cloudName, BinDir: bin, Dir: dir, BootTime: 2 * time.Second, RegisterDelay: time.Second, Log: log})
	t.Cleanup(func() {
		if e != nil {
			_ = e.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	files, err := installmanifests.Render(installmanifests.Options{
		Cloud: c, Image: "registry.example.com/appuio/machine-api-provider:v0.1.0", ClusterID: demo.ClusterID,
		Credentials: map[string]string{"token": "not-used-here"},
		Workers:     2, WorkerSpec: spec, Infra: 1, InfraSpec: spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := installmanifests.Write(filepath.Join(dir, "openshift"), files); err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, "openshift", f.Name))
		if err != nil {
			t.Fatal(err)
		}
		o, err := installmanifests.Decode(b)
		if err != nil || len(o) != 1 {
			t.Fatalf("%s: %d objects, %v", f.Name, len(o), err)
		}
		objs = append(objs, o[0])
	}

	// The webhooks as config/ has them for a running cluster fail closed:
	// before their backend runs, they would refuse every MachineSet.
	overlay, err := installmanifests.Overlay(cloudName, "machine-api-provider:latest")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range overlay {
		if o.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		if err := e.Client.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		for _, f := range objs {
			if f.GetKind() == "MachineSet" {
				refusedByWebhook(t, e.Client, f)
				break
			}
		}
		if err := e.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// What the cluster brings itself: the namespace of the console's
	// dashboards, which the cluster-version operator creates early on.
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-config-managed"}}); err != nil {
		t.Fatal(err)
	}

	// What the installer makes itself: the worker Ignition pointer (the
	// local cluster has one, which this one with the install-time CA
	// replaces); and the machine-config-operator's managed one, whose CA
	// differs (it rotated it).
	if err := e.Client.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: installmanifests.UserDataSecret, Namespace: demo.Namespace},
		Data: map[string][]byte{"userData": []byte(workerIgnition)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker" + actuator.ManagedUserDataSuffix, Namespace: demo.Namespace,
		Labels: map[string]string{actuator.ManagedUserDataLabel: ""}}, Data: map[string][]byte{"userData": []byte(managedIgnition), "disableTemplating": []byte("true\n")}}); err != nil {
		t.Fatal(err)
	}

	// The installer: every file, in no order, again and again until all
	// are in.
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	pending := objs
	deadline := time.Now().Add(2 * time.Minute)
	for round := 1; len(pending) > 0; round++ {
		var next []*unstructured.Unstructured
		for _, o := range pending {
			if err := e.Client.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner("openshift-installer"), client.ForceOwnership); err != nil {
				next = append(next, o)
				if time.Now().After(deadline) {
					t.Fatalf("%s %s never went in: %v", o.GetKind(), o.GetName(), err)
				}
			}
		}
		pending = next
		if len(pending) > 0 {
			time.Sleep(time.Second)
		}
	}
	var vwc admissionregv1.ValidatingWebhookConfiguration
	if err := e.Client.Get(ctx, client.ObjectKey{Name: "machine-api-provider"}, &vwc); err != nil || len(vwc.Webhooks) == 0 || *vwc.Webhooks[0].FailurePolicy != admissionregv1.Ignore {
		t.Fatalf("the install's validating webhooks: %+v, %v", vwc.Webhooks, err)
	}

	// The workers come from the MachineSets.
	sets := map[string]int{demo.ClusterID + "-worker-" + suffix(spec["zone"].(string)): 2, demo.ClusterID + "-infra-" + suffix(spec["zone"].(string)): 1}
	deadline = time.Now().Add(3 * time.Minute)
	for {
		ok, state := true, []string{}
		for ms, want := range sets {
			var list machinev1beta1.MachineList
			if err := e.Client.List(ctx, &list, client.InNamespace(demo.Namespace), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": ms}); err != nil {
				t.Fatal(err)
			}
			running := 0
			for _, m := range list.Items {
				if m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil {
					running++
				}
			}
			state = append(state, fmt.Sprintf("%s: %d of %d Running", ms, running, want))
			ok = ok && running == want && len(list.Items) == want
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MachineSets' Machines: %v", state)
		}
		time.Sleep(time.Second)
	}
	var machines machinev1beta1.MachineList
	if err := e.Client.List(ctx, &machines, client.InNamespace(demo.Namespace)); err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := e.Client.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		var n corev1.Node
		if err := e.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &n); err != nil {
			t.Fatal(err)
		}
		if m.Spec.ProviderID == nil || n.Spec.ProviderID != *m.Spec.ProviderID {
			t.Errorf("Machine %s: providerID %v, its Node's %q", m.Name, m.Spec.ProviderID, n.Spec.ProviderID)
		}
		if _, ok := n.Labels["node-role.kubernetes.io/"+m.Labels["machine.openshift.io/cluster-api-machine-role"]]; !ok {
			t.Errorf("Node %s lacks its Machine's role label: %v", n.Name, n.Labels)
		}
	}
	for _, err := range fixture.ApproverWouldApprove(machines.Items, nodes.Items) {
		t.Errorf("cluster-machine-approver: %v", err)
	}
	// The MachineSets name the installer's worker-user-data, and every
	// server trusts the CA of the managed Secret.
	userData := map[string]string{}
	if e.Cloudscale != nil {
		for _, s := range e.Cloudscale.Servers() {
			userData[cscloud.Name+"://"+s.UUID] = s.UserData
		}
	} else {
		for _, i := range e.Exoscale.Instances() {
			b, _ := base64.StdEncoding.DecodeString(i.UserData)
			userData[exocloud.Name+"://"+i.ID] = string(b)
		}
	}
	for _, m := range machines.Items {
		if ud := userData[*m.Spec.ProviderID]; !strings.Contains(ud, `"certificateAuthorities":[{"source":"`+rotatedCA+`"}]`) {
			t.Errorf("Machine %s's server trusts another CA than the managed Secret's: %s", m.Name, ud)
		}
	}
}

func suffix(zone string) string {
	if p := strings.Split(zone, "-"); len(p) == 3 {
		return p[1] + p[2]
	}
	return zone
}

// refusedByWebhook wants the create of ms refused by the provider's
// webhook. The API server takes up a new webhook configuration a moment
// after it is written (its informer), so a create may still get through at
// first: it is tried again, for a bounded time, as a dry run (admission runs
// in full, nothing is stored for the controllers to act on).
func refusedByWebhook(t *testing.T, c client.Client, ms *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, ms.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "machine-api-provider") {
			return
		}
		if err != nil {
			t.Fatalf("a MachineSet with the validating webhook failing closed and no backend: %v, want it refused by the webhook", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a MachineSet with the validating webhook failing closed and no backend was admitted for 30s, want it refused")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
