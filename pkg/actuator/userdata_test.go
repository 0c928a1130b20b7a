package actuator

import (
	"errors"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIgnitionPassesThroughUntouched(t *testing.T) {
	// Odd spacing and key order must survive: the bytes are the secret's.
	ign := []byte(`{ "ignition" : {"version":"3.4.0"},  "storage":{} }`)
	got, err := renderUserData(ign, &machinev1.Machine{}, nil)
	if err != nil || string(got) != string(ign) {
		t.Errorf("got %q, %v; want the input unchanged", got, err)
	}
}

func TestJsonnetTemplateSeesMachineAndSecret(t *testing.T) {
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-7", Namespace: "openshift-machine-api"}}
	tmpl := []byte(`local ctx = std.extVar('context');
{ ignition: { version: '3.4.0' }, hostname: ctx.machine.metadata.name, ca: ctx.data.ca }`)
	got, err := renderUserData(tmpl, m, map[string][]byte{"userData": tmpl, "ca": []byte("CA-PEM")})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ca":"CA-PEM","hostname":"worker-7","ignition":{"version":"3.4.0"}}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestJsonnetStringGivesTheString(t *testing.T) {
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-7"}}
	tmpl := []byte("'#cloud-config\\nhostname: ' + std.extVar('context').machine.metadata.name + '\\n'")
	got, err := renderUserData(tmpl, m, nil)
	if err != nil || string(got) != "#cloud-config\nhostname: worker-7\n" {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestTemplateErrorsKeepSecretsOut(t *testing.T) {
	const secret = "s3cr3t-passw0rd-in-template"
	tmpl := []byte("local pw = '" + secret + "';\n{ a: pw + std.extVar('context').data.missing }")
	_, err := renderUserData(tmpl, &machinev1.Machine{}, map[string][]byte{"userData": []byte("x")})
	if err == nil {
		t.Fatal("want an error")
	}
	var inv *invalidError
	if !errors.As(err, &inv) {
		t.Errorf("error %T, want a spec error that fails the Machine", err)
	}
	if msg := err.Error(); strings.Contains(msg, secret) || !strings.Contains(msg, "userDataSecret") || !strings.Contains(msg, "line:column 2:") {
		t.Errorf("error %q: must name userDataSecret and the line, and not quote the template", msg)
	}
}
