package webhooks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

// docMachineSets are the MachineSets the README and the install pages show
// to copy: ```yaml blocks, and `cat <<YAML | oc apply -f -` heredocs, their
// shell variables and <placeholders> filled in as a reader would (a
// network's UUID where the spec wants one).
func docMachineSets(t *testing.T) map[string]string {
	t.Helper()
	vars := strings.NewReplacer("${INFRA}", "c1-x7k2p", "${CLOUD}", "cloudscale", "${MACHINESET}", "c1-x7k2p-worker-rma1")
	uuidPlaceholder := regexp.MustCompile(`(networkUUID|subnetUUID): <[^>\n]*>`)
	placeholder := regexp.MustCompile(`<[^>\n]*>`)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```|cat <<YAML \\| oc apply -f -\n(.*?)\nYAML\n")
	out := map[string]string{}
	for _, doc := range []string{"README.md", "docs/install.md", "docs/getting-started.md"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range blocks.FindAllStringSubmatch(string(raw), -1) {
			block := m[1] + m[2]
			for j, part := range strings.Split(block, "\n---\n") {
				if !regexp.MustCompile(`(?m)^kind: MachineSet$`).MatchString(part) {
					continue
				}
				part = vars.Replace(part)
				part = uuidPlaceholder.ReplaceAllString(part, "$1: 2db69ba3-1864-4608-853a-0771b6885a3a")
				part = placeholder.ReplaceAllString(part, "placeholder")
				out[fmt.Sprintf("%s: block %d.%d", doc, i, j)] = part
			}
		}
	}
	return out
}

// TestDocMachineSetsPassTheWebhook: every MachineSet the README and the
// install pages give to copy is admitted by the provider's webhooks as they
// run on a cluster (the defaulting one, then the validating one, for the
// cluster the MachineSet names), without a warning. The README's first
// MachineSet, the first a reader copies, was refused (no `interfaces`).
func TestDocMachineSetsPassTheWebhook(t *testing.T) {
	sets := docMachineSets(t)
	found := map[string]bool{}
	for name, doc := range sets {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Errorf("%s: %v\n%s", name, err, doc)
			continue
		}
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "providerSpec", "value", "kind")
		var c cloud.Cloud
		switch kind {
		case "CloudscaleMachineProviderSpec":
			c = unreachableCloud()
		case "ExoscaleMachineProviderSpec":
			c = exocloud.New(exocloud.Options{APIEndpoint: "http://127.0.0.1:1/v2"})
		default:
			t.Errorf("%s: a MachineSet of provider spec kind %q", name, kind)
			continue
		}
		found[strings.SplitN(name, ":", 2)[0]+" "+kind] = true
		cluster := u.GetLabels()["machine.openshift.io/cluster-api-cluster"]
		ctx := context.Background()
		obj := runtime.RawExtension{Raw: []byte(mustJSON(t, u.Object))}
		req := request(t, admissionv1.Create, nil, nil)
		req.Object = obj
		resp := webhooks.NewDefaulter(c, webhooks.MachineSets).Handle(ctx, req)
		if !resp.Allowed {
			t.Errorf("%s: the defaulting webhook refuses it: %s", name, resp.Result.Message)
			continue
		}
		resp = webhooks.NewValidator(c, webhooks.MachineSets, webhooks.FixedIdentity(cluster)).Handle(ctx, req)
		if !resp.Allowed {
			t.Errorf("%s: the validating webhook refuses it: %s\n%s", name, resp.Result.Message, doc)
		}
		if len(resp.Warnings) > 0 {
			t.Errorf("%s: admitted with warnings %q", name, resp.Warnings)
		}
	}
	for _, want := range []string{"README.md CloudscaleMachineProviderSpec", "docs/install.md CloudscaleMachineProviderSpec", "docs/install.md ExoscaleMachineProviderSpec",
		"docs/getting-started.md CloudscaleMachineProviderSpec", "docs/getting-started.md ExoscaleMachineProviderSpec"} {
		if !found[want] {
			t.Errorf("no MachineSet of %s was found to check", want)
		}
	}
}
