package userdata

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// noSandbox fails the test if a sandbox is started.
func noSandbox(t *testing.T) *Renderer {
	return &Renderer{started: func(int) { t.Error("a sandbox was started for JSON user data") }}
}

func TestIgnitionPassesThroughUntouched(t *testing.T) {
	// Odd spacing and key order must survive: the bytes are the secret's.
	ign := []byte(`{ "ignition" : {"version":"3.4.0"},  "storage":{} }`)
	got, err := noSandbox(t).Render(context.Background(), ign, &machinev1.Machine{}, nil)
	if err != nil || string(got) != string(ign) {
		t.Errorf("got %q, %v; want the input unchanged", got, err)
	}
}

func TestJsonnetTemplateSeesMachineAndSecret(t *testing.T) {
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-7", Namespace: "openshift-machine-api"}}
	tmpl := []byte(`local ctx = std.extVar('context');
{ ignition: { version: '3.4.0' }, hostname: ctx.machine.metadata.name, ca: ctx.data.ca, html: '<&>' }`)
	got, err := Default.Render(context.Background(), tmpl, m, map[string][]byte{"userData": tmpl, "ca": []byte("CA-PEM")})
	if err != nil {
		t.Fatal(err)
	}
	// Compact JSON with HTML characters escaped, as the provider always wrote it.
	want := `{"ca":"CA-PEM","hostname":"worker-7","html":"\u003c\u0026\u003e","ignition":{"version":"3.4.0"}}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestJsonnetStringGivesTheString(t *testing.T) {
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-7"}}
	tmpl := []byte("'#cloud-config\\nhostname: ' + std.extVar('context').machine.metadata.name + '\\n'")
	got, err := Default.Render(context.Background(), tmpl, m, nil)
	if err != nil || string(got) != "#cloud-config\nhostname: worker-7\n" {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestTemplateErrorsKeepSecretsOut(t *testing.T) {
	const secret = "s3cr3t-passw0rd-in-template"
	for name, tc := range map[string]struct{ tmpl, where string }{
		"runtime": {"local pw = '" + secret + "';\n{ a: pw + std.extVar('context').data.missing }", "line:column 2:"},
		"error":   {"local pw = '" + secret + "';\n\n  error pw", "line:column 3:"},
		"syntax":  {"local pw = '" + secret + "';\n{ a: pw +  }", "line:column 2:"},
		"assert":  {"assert '" + secret + "' == 'x' : '" + secret + "'; 1", "line:column 1:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Default.Render(context.Background(), []byte(tc.tmpl), &machinev1.Machine{}, map[string][]byte{"userData": []byte("x"), "pw": []byte(secret)})
			e := asError(t, err, KindTemplate)
			if msg := e.Error(); strings.Contains(msg, secret) || !strings.Contains(msg, tc.where) {
				t.Errorf("error %q: must name %q and not quote the template", msg, tc.where)
			}
		})
	}
}

func TestOutputLargerThanAllowed(t *testing.T) {
	r := &Renderer{MaxOutputBytes: 1000}
	_, err := r.Render(context.Background(), []byte("std.repeat('x', 1001)"), nil, nil)
	e := asError(t, err, KindOutput)
	if !strings.Contains(e.Error(), "1001 bytes") {
		t.Errorf("error %q does not say how large the output is", e)
	}
	if got, err := r.Render(context.Background(), []byte("std.repeat('x', 1000)"), nil, nil); err != nil || len(got) != 1000 {
		t.Errorf("1000 bytes: got %d bytes, %v", len(got), err)
	}
}

func TestRefusesToRunWithoutMain(t *testing.T) {
	mainCalled.Store(false)
	defer mainCalled.Store(true)
	_, err := (&Renderer{started: func(int) { t.Error("a sandbox was started") }}).Render(context.Background(), []byte("1 + 1"), nil, nil)
	var e *Error
	if err == nil || errors.As(err, &e) || !strings.Contains(err.Error(), "userdata.Main") {
		t.Errorf("got %v, want a plain error naming userdata.Main", err)
	}
}

// asError asserts err is an *Error of kind k.
func asError(t *testing.T, err error, k Kind) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T %v, want an *Error of kind %s", err, err, k)
	}
	if e.Kind != k {
		t.Fatalf("got kind %s (%v), want %s", e.Kind, e, k)
	}
	return e
}

func asSandboxError(t *testing.T, err error, k Kind) *SandboxError {
	t.Helper()
	var e *SandboxError
	if !errors.As(err, &e) || errors.As(err, new(*Error)) {
		t.Fatalf("got %T %v, want a *SandboxError of kind %s and no template error", err, err, k)
	}
	if e.Kind != k {
		t.Fatalf("got kind %s (%v), want %s", e.Kind, e, k)
	}
	return e
}

// TestTemplateSeesSelectedSecrets: the context offers the secrets a
// userDataSecretSelector picked as "secrets", Secret objects as the API has
// them (data base64), and null without a selector, as appuio's provider
// does (v0.4.0, pkg/machine/actuator.go): its templates take the
// machine-config-operator's <machineset>-user-data-managed Ignition from
// there.
func TestTemplateSeesSelectedSecrets(t *testing.T) {
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "app-7ws9q", Labels: map[string]string{"machine.openshift.io/cluster-api-machineset": "app"}}}
	managed := map[string]any{
		"metadata": map[string]any{"name": "app-user-data-managed", "namespace": "openshift-machine-api"},
		"data":     map[string]any{"userData": base64.StdEncoding.EncodeToString([]byte(`{"ignition":{"security":{"tls":{"certificateAuthorities":[{"source":"data:,NEW-CA"}]}}}}`))},
		"type":     "Opaque",
	}
	tmpl := []byte(`local ctx = std.extVar('context');
local set = ctx.machine.metadata.labels['machine.openshift.io/cluster-api-machineset'];
local found = if ctx.secrets == null then [] else std.filter(function(s) s.metadata.name == set + '-user-data-managed', ctx.secrets);
local ca = if std.length(found) == 1
  then std.parseJson(std.decodeUTF8(std.base64DecodeBytes(found[0].data.userData))).ignition.security.tls.certificateAuthorities
  else [{ source: 'data:,' + ctx.data.ignitionCA }];
{ ignition: { version: '3.1.0', security: { tls: { certificateAuthorities: ca } } }, n: if ctx.secrets == null then -1 else std.length(ctx.secrets) }`)
	data := map[string][]byte{"userData": tmpl, "ignitionCA": []byte("OLD-CA")}
	for name, tc := range map[string]struct {
		secrets []any
		want    string
	}{
		"no selector":      {nil, `{"ignition":{"security":{"tls":{"certificateAuthorities":[{"source":"data:,OLD-CA"}]}},"version":"3.1.0"},"n":-1}`},
		"nothing selected": {[]any{}, `{"ignition":{"security":{"tls":{"certificateAuthorities":[{"source":"data:,OLD-CA"}]}},"version":"3.1.0"},"n":0}`},
		"managed selected": {[]any{managed}, `{"ignition":{"security":{"tls":{"certificateAuthorities":[{"source":"data:,NEW-CA"}]}},"version":"3.1.0"},"n":1}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Default.RenderContext(context.Background(), tmpl, Context{Machine: m, Data: data, Secrets: tc.secrets})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestContextTooLargeIsTheTemplates: a context larger than the sandbox reads
// is the template's (its selector's) fault, named, not retried.
func TestContextTooLargeIsTheTemplates(t *testing.T) {
	big := strings.Repeat("x", maxRequest)
	_, err := noSandbox(t).RenderContext(context.Background(), []byte("1 +"), Context{Machine: &machinev1.Machine{}, Secrets: []any{map[string]any{"data": map[string]any{"k": big}}}})
	var tmplErr *Error
	if !errors.As(err, &tmplErr) || tmplErr.Kind != KindInput || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("got %v, want an *Error of kind %s that quotes nothing", err, KindInput)
	}
}
