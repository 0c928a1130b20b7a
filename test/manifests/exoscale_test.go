package manifests_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestExoscaleOverlay: the Exoscale overlay configures the deployer for
// Exoscale (the rest is checked for every kustomization): the provider's
// cloud, the credentials secret and the environment its keys become, and
// the controllers' service account named after Exoscale. Nothing it renders
// names cloudscale.ch: not a name, a reference, a lease nor a secret.
func TestExoscaleOverlay(t *testing.T) {
	objs := render(t, "overlays/exoscale")
	args := deployerArgs(t, objs)
	for _, want := range []string{
		"--service-account=machine-api-controllers-exoscale",
		"--cloud=exoscale",
		"--credentials-secret=exoscale-credentials",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("the deployer's args %v lack %s", args, want)
		}
	}
	for _, u := range objs {
		raw, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ToLower(string(raw)), "cloudscale") {
			t.Errorf("%s names cloudscale: %s", describe(u), raw)
		}
	}
}

// TestOverlaysDifferOnlyInTheCloud: the Exoscale overlay is the cloudscale
// one with Exoscale's names (machine-api-controllers-exoscale for the
// controllers' Deployment, service account, roles and bindings,
// exoscale-machine-api-provider for the manager's lease), the deployer
// configured for Exoscale and the webhooks validating Exoscale's specs.
// Any other difference (a placement, a rule, an annotation one overlay has
// and the other lacks) fails here.
func TestOverlaysDifferOnlyInTheCloud(t *testing.T) {
	raw, err := json.Marshal(objectsByName(render(t, "overlays/cloudscale")))
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.NewReplacer(
		"machine-api-controllers-cloudscale", "machine-api-controllers-exoscale",
		"cloudscale-machine-api-provider", "exoscale-machine-api-provider",
	).Replace(string(raw))
	var want map[string]map[string]any
	if err := json.Unmarshal([]byte(renamed), &want); err != nil {
		t.Fatal(err)
	}
	got := objectsByName(render(t, "overlays/exoscale"))

	// The deployer's configuration: cloudscale.ch's token secret gives way
	// to Exoscale's cloud and credentials.
	wantArgs := slices.DeleteFunc(deployerArgs(t, objectsOf(want)), func(a string) bool { return a == "--token-secret=cloudscale-token" })
	wantArgs = append(wantArgs, "--cloud=exoscale", "--credentials-secret=exoscale-credentials")
	if gotArgs := deployerArgs(t, objectsOf(got)); !slices.Equal(gotArgs, wantArgs) {
		t.Errorf("the deployer's args:\n  %v\nwant\n  %v", gotArgs, wantArgs)
	}
	// The webhooks': Exoscale's provider specs.
	wantArgs = slices.Clone(argsOf(t, objectsOf(want), WebhookDeployment))
	if i := slices.Index(wantArgs, "--cloud=cloudscale"); i >= 0 {
		wantArgs[i] = "--cloud=exoscale"
	}
	if gotArgs := argsOf(t, objectsOf(got), WebhookDeployment); !slices.Equal(gotArgs, wantArgs) {
		t.Errorf("the webhooks' args:\n  %v\nwant\n  %v", gotArgs, wantArgs)
	}
	for _, m := range []map[string]map[string]any{want, got} {
		for _, o := range m {
			if o["kind"] == "Deployment" {
				containers, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "containers")
				delete(containers[0].(map[string]any), "args")
				if err := unstructured.SetNestedSlice(o, containers, "spec", "template", "spec", "containers"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for k, o := range want {
		if !reflect.DeepEqual(got[k], o) {
			g, _ := json.MarshalIndent(got[k], "", "  ")
			w, _ := json.MarshalIndent(o, "", "  ")
			t.Errorf("%s:\n%s\nwant (the cloudscale overlay's, renamed)\n%s", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: only in the Exoscale overlay", k)
		}
	}
}

// objectsByName keys objs by kind, namespace and name.
func objectsByName(objs []*unstructured.Unstructured) map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, u := range objs {
		m[describe(u)] = u.Object
	}
	return m
}

func objectsOf(m map[string]map[string]any) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, o := range m {
		objs = append(objs, &unstructured.Unstructured{Object: o})
	}
	return objs
}

// deployerArgs are the args of the deployer's container in objs.
func deployerArgs(t testing.TB, objs []*unstructured.Unstructured) []string {
	t.Helper()
	return argsOf(t, objs, DeployerDeployment)
}

// argsOf are the args of the first container of Deployment name in objs.
func argsOf(t testing.TB, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	d := deploymentIn(objs, name)
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}
