package ownaudit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	csv1 "github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// The whole audit, as a suite runs it, on a real API server with its audit
// log and the cloudscale.ch emulator over the official SDK: a write to
// another cluster's server and a Node deleted by someone who deletes no
// Nodes fail it, printed; the cluster's own write and the CCM's delete of
// the Node of a server deleted behind the cluster's back pass.
func TestRecorderCatchesForeignWriteAndNodeDelete(t *testing.T) {
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(NodeDeletePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), func(env *envtest.Environment) {
		env.ControlPlane.GetAPIServer().Configure().Set("audit-policy-file", policy).Set("audit-log-path", auditLog)
	})
	emu, err := emucs.New(emucs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	cs := sdk.NewClient(http.DefaultClient)
	cs.BaseURL, _ = url.Parse(srv.URL + "/")
	cs.AuthToken = "provider"
	mk := func(name, cluster string) string {
		s, err := cs.Servers.Create(ctx, &sdk.ServerRequest{Name: name, Zone: "rma1", Flavor: "flex-8-4", Image: "custom:rhcos-4.19", SSHKeys: []string{},
			TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: &sdk.TagMap{csv1.TagClusterID: cluster, csv1.TagMachineName: name}}})
		if err != nil {
			t.Fatal(err)
		}
		return s.UUID
	}
	ours, theirs := mk("w1", us), mk("b1", them)
	kube := func(agent string) client.Client {
		c := rest.CopyConfig(cfg)
		c.UserAgent = agent
		k, err := client.New(c, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	admin := kube("ownaudit.test")
	for name, pid := range map[string]string{"w1": "cloudscale://" + ours, "master-0": ""} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: pid}}
		if err := admin.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}

	rec := Begin(t, Source{Cloud: emu.Harness().Audit(), Config: cfg, AuditLog: auditLog})
	tag := func(id string) {
		if err := cs.Servers.Update(ctx, id, &sdk.ServerUpdateRequest{TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: &sdk.TagMap{csv1.TagClusterID: us, "x": "y"}}}); err != nil {
			t.Fatal(err)
		}
	}
	tag(ours)
	tag(theirs) // the foreign write
	// Behind the cluster's back, its server goes; the CCM deletes its Node.
	someone := sdk.NewClient(http.DefaultClient)
	someone.BaseURL, someone.AuthToken = cs.BaseURL, "someone-else"
	if err := someone.Servers.Delete(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if err := kube(AgentCCM+"/v1.34.4").Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}); err != nil {
		t.Fatal(err)
	}
	// Someone deletes master-0: the foreign Node delete.
	if err := kube("kubectl/v1.34.4").Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-0"}}); err != nil {
		t.Fatal(err)
	}

	r, err := rec.Report(Options{ClusterID: us})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.Counts())
	if r.Writes != 3 || len(r.Foreign) != 1 || !strings.Contains(r.Foreign[0], "PATCH /v1/servers/{uuid} (/v1/servers/"+theirs+") -> 204 by "+harness.CallerToken("provider")) ||
		!strings.Contains(r.Foreign[0], `cluster "`+them+`"'s`) {
		t.Errorf("writes: %d judged, foreign %q; want 3, the PATCH of %s's server", r.Writes, r.Foreign, them)
	}
	if r.NodeDeletes != 2 || len(r.ForeignNodeDeletes) != 1 || !strings.Contains(r.ForeignNodeDeletes[0], `Node master-0 (providerID "") deleted at`) ||
		!strings.Contains(r.ForeignNodeDeletes[0], `by "kubectl/v1.34.4"`) {
		t.Errorf("Node deletes: %d judged, foreign %q; want 2, master-0's", r.NodeDeletes, r.ForeignNodeDeletes)
	}
}
