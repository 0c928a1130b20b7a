package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

// namespace is where the documented webhook configurations act.
const namespace = "openshift-machine-api"

const clusterID = "c1-x7k2p"

// docManifests are the webhook configurations of docs/webhook.md, the ones
// a cluster gets.
func docManifests(t *testing.T) ([]*admissionregv1.MutatingWebhookConfiguration, []*admissionregv1.ValidatingWebhookConfiguration) {
	t.Helper()
	w := testenv.DocWebhooks(t, filepath.Join("..", "..", "docs", "webhook.md"))
	if len(w.Mutating) != 1 || len(w.Validating) != 1 {
		t.Fatalf("docs/webhook.md has %d mutating and %d validating webhook configurations, want one each", len(w.Mutating), len(w.Validating))
	}
	return w.Mutating, w.Validating
}

// TestDocManifests checks the documented webhook configurations for what
// the webhooks rely on: the paths they are served on, the resources and
// operations, no side effects, and the service CA injecting the CA bundle.
func TestDocManifests(t *testing.T) {
	mut, val := docManifests(t)
	type hook struct {
		name        string
		cc          admissionregv1.WebhookClientConfig
		rules       []admissionregv1.RuleWithOperations
		sideEffects *admissionregv1.SideEffectClass
		objSel      *metav1.LabelSelector
	}
	var hooks []hook
	for _, m := range mut {
		if m.Annotations["service.beta.openshift.io/inject-cabundle"] != "true" {
			t.Errorf("%s: no service.beta.openshift.io/inject-cabundle: \"true\"", m.Name)
		}
		for _, w := range m.Webhooks {
			hooks = append(hooks, hook{w.Name, w.ClientConfig, w.Rules, w.SideEffects, w.ObjectSelector})
		}
	}
	for _, v := range val {
		if v.Annotations["service.beta.openshift.io/inject-cabundle"] != "true" {
			t.Errorf("%s: no service.beta.openshift.io/inject-cabundle: \"true\"", v.Name)
		}
		for _, w := range v.Webhooks {
			hooks = append(hooks, hook{w.Name, w.ClientConfig, w.Rules, w.SideEffects, w.ObjectSelector})
		}
	}
	want := map[string]string{
		webhooks.MutateMachinePath:      "machines",
		webhooks.ValidateMachinePath:    "machines",
		webhooks.MutateMachineSetPath:   "machinesets",
		webhooks.ValidateMachineSetPath: "machinesets",
	}
	for _, h := range hooks {
		if h.cc.Service == nil || h.cc.Service.Path == nil || len(h.cc.CABundle) > 0 {
			t.Errorf("%s: want a service with a path, and no caBundle (the service CA injects it)", h.name)
			continue
		}
		p := *h.cc.Service.Path
		res, ok := want[p]
		if !ok {
			t.Errorf("%s: path %s is not one the webhooks are served on", h.name, p)
			continue
		}
		delete(want, p)
		if len(h.rules) != 1 || !reflect.DeepEqual(h.rules[0].Resources, []string{res}) ||
			!reflect.DeepEqual(h.rules[0].Operations, []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update}) ||
			!reflect.DeepEqual(h.rules[0].APIGroups, []string{machinev1.GroupName}) {
			t.Errorf("%s: rules %+v, want CREATE and UPDATE of %s.%s", h.name, h.rules, res, machinev1.GroupName)
		}
		if h.sideEffects == nil || *h.sideEffects != admissionregv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects must be None", h.name)
		}
		if h.objSel != nil {
			t.Errorf("%s: has an objectSelector", h.name)
		}
	}
	for p := range want {
		t.Errorf("no webhook for %s", p)
	}
}

// countingTransport fails and counts every request: the webhooks must make
// no cloud call.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.n.Add(1)
	return nil, errors.New("the webhooks must not call the cloud")
}

type env struct {
	c   client.Client
	cfg *rest.Config
}

// startWebhooks starts a kube-apiserver with the Machine API CRDs and the
// documented webhook configurations, and the provider's manager serving
// the webhooks on the real cloudscale.ch cloud, pointed at an unreachable
// API with a transport that counts calls.
//
// The manager watches another namespace than the tests' objects are in, so
// its machine controller leaves them alone: whatever reaches the cloud
// would come from the webhooks.
func startWebhooks(t *testing.T) *env {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	mut, val := docManifests(t)
	hooks := &testenv.Webhooks{Mutating: mut, Validating: val}
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), testenv.WithCRDs(testenv.InfrastructureCRD(t)), testenv.WithWebhooks(hooks))

	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	// The cluster's identity, which the webhooks read as in a cluster.
	createInfrastructure(t, c, clusterID)

	calls := &countingTransport{}
	cs := cscloud.New(cscloud.Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "x", HTTPClient: &http.Client{Transport: calls}})
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- webhooks.Serve(ctx, webhooks.ServeOptions{
			Cloud: cs, Config: cfg, Port: hooks.Port(), CertDir: hooks.CertDir(),
			HealthProbeBindAddress: "0", MetricsBindAddress: "0", InfrastructurePoll: 100 * time.Millisecond,
		})
	}()
	// Cleanups run last first: the server stops before the calls are counted.
	t.Cleanup(func() {
		if n := calls.n.Load(); n != 0 {
			t.Errorf("the webhooks made %d cloud API calls, want none", n)
		}
	})
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("webhooks.Serve: %v", err)
		}
	})

	// Wait until the API server reaches the validating webhook and the
	// webhook knows the cluster's identity: a dry run of an invalid
	// Machine is refused by it (rather than failing to call it) for its
	// spec, not for an identity it has not read yet.
	deadline := time.Now().Add(time.Minute)
	for {
		m := machine("probe", map[string]any{}, defaultLabels())
		err := c.Create(ctx, m, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "denied the request") && !strings.Contains(err.Error(), "does not know the cluster's identity") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhooks did not come up: last dry run: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return &env{c: c, cfg: cfg}
}

// createInfrastructure creates the Infrastructure named cluster, whose
// infrastructureName is the cluster's identity.
func createInfrastructure(t *testing.T, c client.Client, name string) {
	t.Helper()
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	if err := c.Create(context.Background(), infra); err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: name,
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if err := c.Status().Update(context.Background(), infra); err != nil {
		t.Fatal(err)
	}
}

func validSpec() map[string]any {
	return map[string]any{
		"zone":           "rma1",
		"flavor":         "flex-8-4",
		"image":          "custom:rhcos-4.19",
		"userDataSecret": map[string]any{"name": "worker-user-data"},
		"interfaces":     []any{map[string]any{"type": "Public"}},
	}
}

func raw(t testing.TB, spec map[string]any) *runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &runtime.RawExtension{Raw: b}
}

func defaultLabels() map[string]string {
	return map[string]string{actuator.ClusterIDLabel: clusterID}
}

func machine(name string, spec map[string]any, labels map[string]string) *machinev1.Machine {
	b, _ := json.Marshal(spec)
	return &machinev1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec:       machinev1.MachineSpec{ProviderSpec: machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: b}}},
	}
}

func machineSet(name string, spec map[string]any, templateLabels map[string]string) *machinev1.MachineSet {
	b, _ := json.Marshal(spec)
	return &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: defaultLabels()},
		Spec: machinev1.MachineSetSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machineset": name}},
			Template: machinev1.MachineTemplateSpec{
				ObjectMeta: machinev1.ObjectMeta{Labels: templateLabels},
				Spec:       machinev1.MachineSpec{ProviderSpec: machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: b}}},
			},
		},
	}
}

// invalid is a spec or label problem, and the error it must bring: the
// field's path below the provider spec (or the labels) and the start of
// the message.
type invalid struct {
	name   string
	mutate func(spec map[string]any, labels map[string]string)
	// field is below the provider spec, or below the labels if label.
	field string
	label bool
	want  string
}

var invalids = []invalid{
	{name: "another apiVersion", mutate: func(s map[string]any, _ map[string]string) {
		s["apiVersion"], s["kind"] = "machine.appuio.io/v2", "CloudscaleMachineProviderSpec"
	}, field: ".apiVersion", want: `Unsupported value: "machine.appuio.io/v2": supported values: "machine.appuio.io/v1beta1"`},
	{name: "malformed SSH key", mutate: func(s map[string]any, _ map[string]string) { s["sshKeys"] = []any{"ssh-ed25519 AAAA admin@example"} },
		field: ".sshKeys[0]", want: `Invalid value: "(withheld)": must be an OpenSSH public key`},
	{name: "missing zone", mutate: func(s map[string]any, _ map[string]string) { delete(s, "zone") },
		field: ".zone", want: "Required value: the zone to run the server in"},
	{name: "zone not a slug", mutate: func(s map[string]any, _ map[string]string) { s["zone"] = "RMA-1" },
		field: ".zone", want: `Invalid value: "RMA-1": must be a zone slug`},
	{name: "missing flavor", mutate: func(s map[string]any, _ map[string]string) { delete(s, "flavor") },
		field: ".flavor", want: "Required value: the server flavor"},
	{name: "missing image", mutate: func(s map[string]any, _ map[string]string) { delete(s, "image") },
		field: ".image", want: "Required value: a public image slug"},
	{name: "root volume too small", mutate: func(s map[string]any, _ map[string]string) { s["rootVolumeSizeGB"] = 5 },
		field: ".rootVolumeSizeGB", want: "Invalid value: 5: must be at least 10"},
	{name: "interface type Bogus", mutate: func(s map[string]any, _ map[string]string) {
		s["interfaces"] = []any{map[string]any{"type": "Bogus"}}
	}, field: ".interfaces[0].type", want: `Unsupported value: "Bogus": supported values: "Public", "Private"`},
	{name: "private interface without network", mutate: func(s map[string]any, _ map[string]string) {
		s["interfaces"] = []any{map[string]any{"type": "Public"}, map[string]any{"type": "Private"}}
	}, field: ".interfaces[1].networkUUID", want: "Required value: a Private interface needs a networkUUID or addresses"},
	{name: "network UUID not a UUID", mutate: func(s map[string]any, _ map[string]string) {
		s["interfaces"] = []any{map[string]any{"type": "Private", "networkUUID": "not-a-uuid"}}
	}, field: ".interfaces[0].networkUUID", want: `Invalid value: "not-a-uuid": must be a network UUID`},
	{name: "public interface with network", mutate: func(s map[string]any, _ map[string]string) {
		s["interfaces"] = []any{map[string]any{"type": "Public", "networkUUID": "2db69ba3-1864-4608-853a-0771b6885a3a"}}
	}, field: ".interfaces[0].networkUUID", want: "Forbidden: only Private interfaces connect to a network"},
	{name: "address not an IP", mutate: func(s map[string]any, _ map[string]string) {
		s["interfaces"] = []any{map[string]any{"type": "Private", "addresses": []any{
			map[string]any{"subnetUUID": "33333333-1864-4608-853a-0771b6885a3a", "address": "10.0.0.300"},
		}}}
	}, field: ".interfaces[0].addresses[0].address", want: `Invalid value: "10.0.0.300": must be an IP address`},
	{name: "reserved tag key", mutate: func(s map[string]any, _ map[string]string) {
		s["tags"] = map[string]any{"machine-api-provider-cloudscale_appuio_io_name": "x"}
	}, field: ".tags[machine-api-provider-cloudscale_appuio_io_name]", want: "Forbidden: this tag identifies the provider's servers"},
	{name: "anti-affinity key not a DNS label", mutate: func(s map[string]any, _ map[string]string) { s["antiAffinityKey"] = "Workers_A" },
		field: ".antiAffinityKey", want: `Invalid value: "Workers_A": a lowercase RFC 1123 label`},
	{name: "server group not a UUID", mutate: func(s map[string]any, _ map[string]string) { s["serverGroups"] = []any{"my-group"} },
		field: ".serverGroups[0]", want: `Invalid value: "my-group": must be a server group UUID`},
	{name: "token secret without name", mutate: func(s map[string]any, _ map[string]string) { s["tokenSecret"] = map[string]any{"name": ""} },
		field: ".tokenSecret.name", want: "Required value: the name of the secret holding the API token"},
	{name: "user data secret without name", mutate: func(s map[string]any, _ map[string]string) { s["userDataSecret"] = map[string]any{} },
		field: ".userDataSecret.name", want: "Required value: the name of the secret holding the user data"},
	{name: "flavor a list", mutate: func(s map[string]any, _ map[string]string) { s["flavor"] = []any{"flex-8-4"} },
		field: "", want: `Invalid value: "(raw JSON)": cannot decode field "flavor": got JSON array, want string`},
	{name: "root volume too large", mutate: func(s map[string]any, _ map[string]string) { s["rootVolumeSizeGB"] = 10001 },
		field: ".rootVolumeSizeGB", want: "Invalid value: 10001: must be at most 10000"},
	{name: "tag value with a line break", mutate: func(s map[string]any, _ map[string]string) { s["tags"] = map[string]any{"team": "a\nb"} },
		field: ".tags[team]", want: `Invalid value: "a\nb": tag values must not hold control characters`},
	{name: "flavor too long", mutate: func(s map[string]any, _ map[string]string) { s["flavor"] = strings.Repeat("f", 65) },
		field: ".flavor", want: "Too long: may not be more than 64 bytes"},
	{name: "missing cluster label", mutate: func(_ map[string]any, l map[string]string) { delete(l, actuator.ClusterIDLabel) },
		label: true, field: "[machine.openshift.io/cluster-api-cluster]", want: `Required value: the cluster's infrastructure name, which tags the Machine's server ("c1-x7k2p")`},
	// Copied from another cluster: the provider never acts on it, and
	// says so at once.
	{name: "another cluster's label", mutate: func(_ map[string]any, l map[string]string) { l[actuator.ClusterIDLabel] = "c2-other" },
		label: true, field: "[machine.openshift.io/cluster-api-cluster]", want: `Invalid value: "c2-other": names cluster "c2-other", and this cluster is "c1-x7k2p"`},
}

// kinds are Machines and MachineSets, with where each has the provider
// spec and the Machine's labels.
var kinds = []struct {
	kind, specPath, labelsPath string
	object                     func(name string, spec map[string]any, labels map[string]string) client.Object
	webhook                    string
}{
	{"Machine", "spec.providerSpec.value", "metadata.labels",
		func(n string, s map[string]any, l map[string]string) client.Object { return machine(n, s, l) },
		"validate-machines.machine-api-provider.appuio.io"},
	{"MachineSet", "spec.template.spec.providerSpec.value", "spec.template.metadata.labels",
		func(n string, s map[string]any, l map[string]string) client.Object { return machineSet(n, s, l) },
		"validate-machinesets.machine-api-provider.appuio.io"},
}

// refused checks that err is the validating webhook refusing obj as
// invalid, with a message and a cause naming field.
func refused(t *testing.T, err error, webhook, field, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted, want refused with %s: %s", field, want)
	}
	if !apierrors.IsInvalid(err) {
		t.Errorf("error is not Invalid (422): %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, fmt.Sprintf("admission webhook %q denied the request", webhook)) {
		t.Errorf("error not from %s: %s", webhook, msg)
	}
	if !strings.Contains(msg, field+": "+want) {
		t.Errorf("error does not say %q:\n%s", field+": "+want, msg)
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Details != nil {
		for _, c := range se.ErrStatus.Details.Causes {
			if c.Field == field {
				return
			}
		}
		t.Errorf("no cause names %s: %+v", field, se.ErrStatus.Details.Causes)
	} else {
		t.Errorf("no status details in %v", err)
	}
}

func specOf(t *testing.T, ps machinev1.ProviderSpec) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ps.Value.Raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// jsonRoundTrip makes v look as decoded JSON does (numbers float64).
func jsonRoundTrip(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var defaulted = map[string]any{
	"apiVersion":       "machine.appuio.io/v1beta1",
	"kind":             "CloudscaleMachineProviderSpec",
	"zone":             "rma1",
	"flavor":           "flex-8-4",
	"image":            "custom:rhcos-4.19",
	"userDataSecret":   map[string]any{"name": "worker-user-data"},
	"rootVolumeSizeGB": float64(100),
	"useIPV6":          true,
	"interfaces":       []any{map[string]any{"type": "Public"}},
}

func TestWebhooks(t *testing.T) {
	start := time.Now()
	e := startWebhooks(t)
	t.Logf("control plane and webhooks up in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	t.Run("invalid specs are refused naming the field", func(t *testing.T) {
		for _, k := range kinds {
			for i, c := range invalids {
				t.Run(k.kind+"/"+c.name, func(t *testing.T) {
					spec, labels := validSpec(), defaultLabels()
					c.mutate(spec, labels)
					obj := k.object(fmt.Sprintf("invalid-%d", i), spec, labels)
					err := e.c.Create(ctx, obj)
					path := k.specPath + c.field
					if c.label {
						path = k.labelsPath + c.field
					}
					refused(t, err, k.webhook, path, c.want)
				})
			}
		}
	})

	t.Run("every problem is named at once", func(t *testing.T) {
		spec := validSpec()
		delete(spec, "flavor")
		spec["rootVolumeSizeGB"] = 5
		err := e.c.Create(ctx, machineSet("c1-worker-rma1", spec, map[string]string{}))
		refused(t, err, kinds[1].webhook, "spec.template.spec.providerSpec.value.flavor", "Required value")
		refused(t, err, kinds[1].webhook, "spec.template.spec.providerSpec.value.rootVolumeSizeGB", "Invalid value: 5")
		refused(t, err, kinds[1].webhook, "spec.template.metadata.labels[machine.openshift.io/cluster-api-cluster]", "Required value")
		t.Logf("the API server says: %v", err)
	})

	t.Run("a valid Machine is admitted and defaulted", func(t *testing.T) {
		m := machine("valid", validSpec(), defaultLabels())
		if err := e.c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		got := &machinev1.Machine{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		if s := specOf(t, got.Spec.ProviderSpec); !reflect.DeepEqual(s, defaulted) {
			t.Errorf("stored spec\n%v\nwant\n%v", s, defaulted)
		}
	})

	t.Run("a valid MachineSet is admitted and defaulted", func(t *testing.T) {
		ms := machineSet("valid", validSpec(), defaultLabels())
		if err := e.c.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		got := &machinev1.MachineSet{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			t.Fatal(err)
		}
		if s := specOf(t, got.Spec.Template.Spec.ProviderSpec); !reflect.DeepEqual(s, defaulted) {
			t.Errorf("stored template spec\n%v\nwant\n%v", s, defaulted)
		}
	})

	t.Run("given values and unknown members are kept", func(t *testing.T) {
		spec := validSpec()
		spec["apiVersion"] = "machine.appuio.io/v1beta1"
		spec["kind"] = "CloudscaleMachineProviderSpec"
		spec["rootVolumeSizeGB"] = 100
		spec["useIPV6"] = false
		spec["interfaces"] = []any{map[string]any{"type": "Private", "networkUUID": "2db69ba3-1864-4608-853a-0771b6885a3a", "futureField": 1}}
		spec["futureField"] = map[string]any{"x": "y"}
		spec["tags"] = map[string]any{}
		m := machine("explicit", spec, defaultLabels())
		if err := e.c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		got := &machinev1.Machine{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		if s, want := specOf(t, got.Spec.ProviderSpec), jsonRoundTrip(t, spec); !reflect.DeepEqual(s, want) {
			t.Errorf("stored spec\n%v\nwant it unchanged\n%v", s, want)
		}
	})

	t.Run("another provider's Machine passes untouched", func(t *testing.T) {
		spec := map[string]any{
			"apiVersion":   "machine.openshift.io/v1beta1",
			"kind":         "AWSMachineProviderConfig",
			"instanceType": "m5.large",
			"zone":         []any{"not", "ours"},
		}
		m := machine("aws", spec, nil)
		if err := e.c.Create(ctx, m); err != nil {
			t.Fatalf("refused: %v", err)
		}
		got := &machinev1.Machine{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		if s, want := specOf(t, got.Spec.ProviderSpec), jsonRoundTrip(t, spec); !reflect.DeepEqual(s, want) {
			t.Errorf("stored spec\n%v\nwant it untouched\n%v", s, want)
		}
		ms := machineSet("aws", spec, nil)
		if err := e.c.Create(ctx, ms); err != nil {
			t.Fatalf("MachineSet refused: %v", err)
		}
	})

	t.Run("a Machine without a provider spec passes", func(t *testing.T) {
		m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "no-spec", Namespace: namespace}}
		if err := e.c.Create(ctx, m); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})

	t.Run("unknown fields are warned about", func(t *testing.T) {
		warnings := &warningCollector{}
		cfg := rest.CopyConfig(e.cfg)
		cfg.WarningHandler = warnings
		c, err := client.New(cfg, client.Options{Scheme: e.c.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		spec := validSpec()
		spec["flavour"] = "plus-32-8"
		spec["baseDomian"] = "c1.example.com"
		for i, k := range kinds {
			warnings.reset()
			if err := c.Create(ctx, k.object(fmt.Sprintf("misspelt-%d", i), spec, defaultLabels())); err != nil {
				t.Fatalf("%s refused: %v", k.kind, err)
			}
			got := warnings.get()
			for _, f := range []string{"flavour", "baseDomian"} {
				if !containsWarning(got, k.specPath+"."+f+": unknown field") {
					t.Errorf("%s: no warning names %s: %q", k.kind, f, got)
				}
			}
		}
	})

	t.Run("names that cannot be hostnames are refused", func(t *testing.T) {
		refused(t, e.c.Create(ctx, machine("c1.worker.a1b2c", validSpec(), defaultLabels())), kinds[0].webhook,
			"metadata.name", `Invalid value: "c1.worker.a1b2c": a Machine's name is its server's hostname`)
		refused(t, e.c.Create(ctx, machineSet("c1.worker", validSpec(), defaultLabels())), kinds[1].webhook,
			"metadata.name", `Invalid value: "c1.worker": the Machines named from it`)
	})

	t.Run("updates are validated too", func(t *testing.T) {
		m := machine("updated", validSpec(), defaultLabels())
		if err := e.c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		// An unrelated change is admitted.
		m.Annotations = map[string]string{"example.com/note": "x"}
		if err := e.c.Update(ctx, m); err != nil {
			t.Fatalf("annotation update refused: %v", err)
		}
		spec := specOf(t, m.Spec.ProviderSpec)
		spec["rootVolumeSizeGB"] = 5
		m.Spec.ProviderSpec.Value = raw(t, spec)
		refused(t, e.c.Update(ctx, m), kinds[0].webhook, "spec.providerSpec.value.rootVolumeSizeGB", "Invalid value: 5: must be at least 10")

		// Dropping the cluster label is refused as well.
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		delete(m.Labels, actuator.ClusterIDLabel)
		refused(t, e.c.Update(ctx, m), kinds[0].webhook, "metadata.labels[machine.openshift.io/cluster-api-cluster]", "Required value")

		// A change of an immutable field is the actuator's to report.
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		spec = specOf(t, m.Spec.ProviderSpec)
		spec["flavor"] = "flex-16-4"
		m.Spec.ProviderSpec.Value = raw(t, spec)
		if err := e.c.Update(ctx, m); err != nil {
			t.Fatalf("flavor change refused: %v", err)
		}
	})
}

// warningCollector keeps the warnings the API server passes on.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningCollector) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = nil
}

func (w *warningCollector) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.warnings...)
}
