package main

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/appuio/machine-api-provider/pkg/uninstall"
)

// TestUninstallTakesTheInstalledCloud: uninstall (and adopt --undo) act on
// the cloud the installed deployer serves, read from the deployer each
// overlay renders, never on a default: on an Exoscale cluster `uninstall
// --apply` without --cloud once released no Machine yet stopped and
// deleted what both overlays share. A --cloud naming the other cloud is
// refused, naming the right one; with no deployer, the one controllers'
// Deployment there tells, and nothing at all asks for --cloud.
func TestUninstallTakesTheInstalledCloud(t *testing.T) {
	root := repoRoot(t)
	ctx := context.Background()
	const ns = "openshift-machine-api"
	for _, cloud := range uninstall.Clouds {
		var deployer *appsv1.Deployment
		for _, u := range kustomizeBuild(t, root, "config/overlays/"+cloud) {
			if u.GetKind() == "Deployment" && u.GetName() == uninstall.DeployerName {
				deployer = &appsv1.Deployment{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, deployer); err != nil {
					t.Fatal(err)
				}
			}
		}
		if deployer == nil {
			t.Fatalf("config/overlays/%s renders no %s", cloud, uninstall.DeployerName)
		}
		deployer.Namespace = ns
		kube := fake.NewClientBuilder().WithObjects(deployer).Build()
		got, err := uninstall.ResolveCloud(ctx, kube, ns, "")
		if err != nil || got != cloud {
			t.Errorf("%s: without --cloud: %q, %v; want %s", cloud, got, err, cloud)
		}
		other := uninstall.Clouds[0]
		if other == cloud {
			other = uninstall.Clouds[1]
		}
		if _, err := uninstall.ResolveCloud(ctx, kube, ns, other); err == nil || !strings.Contains(err.Error(), "--cloud "+cloud) {
			t.Errorf("%s: --cloud %s: %v; want a refusal naming --cloud %s", cloud, other, err, cloud)
		}
		if got, err := uninstall.ResolveCloud(ctx, kube, ns, cloud); err != nil || got != cloud {
			t.Errorf("%s: --cloud %s: %q, %v", cloud, cloud, got, err)
		}

		// The deployer gone (an interrupted uninstall): its controllers say.
		controllers := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uninstall.ControllersName(cloud)}}
		kube = fake.NewClientBuilder().WithObjects(controllers).Build()
		if got, err := uninstall.ResolveCloud(ctx, kube, ns, ""); err != nil || got != cloud {
			t.Errorf("%s: only the controllers: %q, %v", cloud, got, err)
		}
	}
	var nothing client.Client = fake.NewClientBuilder().Build()
	if _, err := uninstall.ResolveCloud(ctx, nothing, ns, ""); err == nil || !strings.Contains(err.Error(), "--cloud") {
		t.Errorf("nothing installed, no --cloud: %v; want one asking for --cloud", err)
	}
	if got, err := uninstall.ResolveCloud(ctx, nothing, ns, "exoscale"); err != nil || got != "exoscale" {
		t.Errorf("nothing installed, --cloud exoscale: %q, %v", got, err)
	}
}
