package userdata

import (
	"context"
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
