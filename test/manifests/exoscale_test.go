package manifests_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestExoscaleOverlay: the Exoscale overlay configures the deployer for
// Exoscale (the rest is checked for every kustomization): the provider's
// cloud, the credentials secret and the environment its keys become.
func TestExoscaleOverlay(t *testing.T) {
	var args []string
	for _, u := range render(t, "overlays/exoscale") {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		args, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	}
	for _, want := range []string{
		"--cloud=exoscale",
		"--credentials-secret=exoscale-credentials",
		"--credentials-env=EXOSCALE_API_KEY=api-key,EXOSCALE_API_SECRET=api-secret",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("the deployer's args %v lack %s", args, want)
		}
	}
	for _, a := range args {
		if a == "--token-secret=cloudscale-token" {
			t.Errorf("the Exoscale overlay hands the provider the cloudscale.ch token secret")
		}
	}
}
