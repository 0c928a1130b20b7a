package adopt

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

const testNamespace = "openshift-machine-api"

// webhookConfigs are the provider's webhook configurations as config/
// installs them.
func webhookConfigs(t *testing.T) ([]*admissionregv1.MutatingWebhookConfiguration, []*admissionregv1.ValidatingWebhookConfiguration) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "webhooks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var mut []*admissionregv1.MutatingWebhookConfiguration
	var val []*admissionregv1.ValidatingWebhookConfiguration
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionregv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), m); err != nil {
				t.Fatal(err)
			}
			mut = append(mut, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionregv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				t.Fatal(err)
			}
			val = append(val, v)
		}
	}
	return mut, val
}

// cpmsCRD is the ControlPlaneMachineSet CRD of the openshift/api module in
// go.mod.
func cpmsCRD(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "machine", "v1", "zz_generated.crd-manifests",
		"0000_10_control-plane-machine-set_01_controlplanemachinesets-Default.crd.yaml")
}

// withWebhooks starts a kube-apiserver with the Machine API and CPMS CRDs,
// the provider's webhook configurations, and the manager serving them for
// cloud c. Its machine controller watches another namespace: nothing but
// the webhooks touches the objects.
func withWebhooks(t *testing.T, c cloud.Cloud) client.Client {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	mut, val := webhookConfigs(t)
	hooks := &testenv.Webhooks{Mutating: mut, Validating: val}
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), testenv.WithCRDs(cpmsCRD(t)), testenv.WithWebhooks(hooks))
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil {
		t.Fatal(err)
	}
	hooks.Serve(t, c, "c1-x7k2p")
	return kube
}

// The ControlPlaneMachineSet's template is each master's provider spec
// after every defaulting step: the masters' Machines as the API server
// stores them (the defaulting webhook has had its say), and a Machine the
// CPMS would make from its template, are byte for byte the template. A
// template the webhook defaulted differently would make an activated CPMS
// replace the masters forever.
func TestCPMSTemplateIsEachMastersSpecAfterDefaulting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cloud cloud.Cloud
		// found is a master's spec as the cloud's survey describes it:
		// what the server is, without the defaults.
		found map[string]any
	}{
		{"cloudscale", cscloud.New(cscloud.Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "x"}), map[string]any{
			"apiVersion": "machine.appuio.io/v1beta1", "kind": "CloudscaleMachineProviderSpec",
			"zone": "rma1", "flavor": "plus-16-4", "image": "custom:rhcos-4.19", "rootVolumeSizeGB": 100, "baseDomain": "c1.example.com",
			"interfaces": []any{map[string]any{"type": "Private", "addresses": []any{map[string]any{"subnetUUID": "2db69ba3-1864-4608-853a-0771b6885a3a"}}}},
		}},
		{"exoscale", exocloud.New(exocloud.Options{APIEndpoint: "http://127.0.0.1:1/v2", DefaultAPIKey: "EXOx", DefaultAPISecret: "x"}), map[string]any{
			"apiVersion": "machine.appuio.io/v1beta1", "kind": "ExoscaleMachineProviderSpec",
			"zone": "ch-gva-2", "instanceType": "standard.extra-large", "template": map[string]any{"name": "rhcos-4.19"}, "diskSize": 100,
			"securityGroups":  []any{map[string]any{"name": "c1_all_machines"}, map[string]any{"name": "c1_control_plane"}},
			"privateNetworks": []any{map[string]any{"name": "c1_clusternet"}}, "sshKeys": []any{"c1-admin"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			kube := withWebhooks(t, tc.cloud)
			a := &Adopter{cloud: tc.cloud, o: Options{ClusterID: "c1-x7k2p", Namespace: testNamespace}}
			g := &Group{Master: true, Role: "master", Name: "control plane", AntiAffinityKey: "master", UserData: UserData{Secret: "c1-master-user-data"}}
			for i, name := range []string{"master-1a2b", "master-3c4d", "master-5e6f"} {
				g.Members = append(g.Members, &Member{MachineName: name, Action: ActAdopt, Found: &cloud.Found{Server: cloud.Server{ID: "id-" + string(rune('a'+i))}}})
			}
			spec := a.memberSpec(g, g.Members[0])
			for k, v := range tc.found {
				spec[k] = v
			}
			var err error
			if g.Spec, g.SpecJSON, err = parse(tc.cloud, spec); err != nil {
				t.Fatal(err)
			}
			if err := a.planObjects(g, &cluster{}); err != nil || g.CPMS == nil {
				t.Fatalf("no CPMS planned: %v, %s", err, g.CPMSNote)
			}
			if err := kube.Create(ctx, g.CPMS); err != nil {
				t.Fatal(err)
			}
			for _, m := range g.Members {
				if err := kube.Create(ctx, m.Machine); err != nil {
					t.Fatal(err)
				}
			}
			var cpms machinev1.ControlPlaneMachineSet
			if err := kube.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "cluster"}, &cpms); err != nil {
				t.Fatal(err)
			}
			tpl := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw
			if !bytes.Equal(tpl, g.SpecJSON) {
				t.Errorf("the stored template is not the planned spec:\n%s\n%s", tpl, g.SpecJSON)
			}
			stored := func(name string) []byte {
				t.Helper()
				var m machinev1beta1.Machine
				if err := kube.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, &m); err != nil {
					t.Fatal(err)
				}
				return m.Spec.ProviderSpec.Value.Raw
			}
			for _, m := range g.Members {
				if got := stored(m.MachineName); !bytes.Equal(got, tpl) {
					t.Errorf("master %s after defaulting:\n%s\nthe template:\n%s", m.MachineName, got, tpl)
				}
			}
			// What the CPMS would make of its template: a Machine with
			// the template's spec, through the same webhooks.
			repl := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "c1-master-replacement", Namespace: testNamespace, Labels: cpms.Spec.Template.OpenShiftMachineV1Beta1Machine.ObjectMeta.Labels}}
			repl.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: tpl}
			if err := kube.Create(ctx, repl); err != nil {
				t.Fatal(err)
			}
			if got := stored(repl.Name); !bytes.Equal(got, tpl) {
				t.Errorf("a Machine made from the template, after defaulting:\n%s\nthe template:\n%s", got, tpl)
			}
			// The control: the same spec as the survey found it, before
			// adopt's parse, is defaulted by the webhook; a template of it
			// would differ from its Machines.
			raw, _ := json.Marshal(spec)
			ctl := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "control", Namespace: testNamespace, Labels: repl.Labels}}
			ctl.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: raw}
			if err := kube.Create(ctx, ctl); err != nil {
				t.Fatal(err)
			}
			if rawCanon, _ := canonical(raw); bytes.Equal(stored(ctl.Name), rawCanon) {
				t.Errorf("the webhook left the undefaulted spec as it was: the test would prove nothing")
			}
		})
	}
}
