package actuator

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"

	"github.com/appuio/machine-api-provider/pkg/userdata"
)

// User data templates are evaluated in a sandbox, which is this test binary
// started again (pkg/userdata). Rendering itself is tested there; these
// tests check what the actuator makes of its results.
func TestMain(m *testing.M) {
	userdata.Main()
	os.Exit(m.Run())
}

func TestIgnitionPassesThroughUntouched(t *testing.T) {
	// Odd spacing and key order must survive: the bytes are the secret's.
	ign := []byte(`{ "ignition" : {"version":"3.4.0"},  "storage":{} }`)
	got, err := renderUserData(context.Background(), userdata.Default, ign, &machinev1.Machine{}, nil)
	if err != nil || string(got) != string(ign) {
		t.Errorf("got %q, %v; want the input unchanged", got, err)
	}
}

func TestTemplateErrorsFailTheMachine(t *testing.T) {
	const secret = "s3cr3t-passw0rd-in-template"
	r := &userdata.Renderer{Timeout: time.Second}
	for name, tc := range map[string]struct{ tmpl, want string }{
		"evaluation": {"local pw = '" + secret + "';\n{ a: pw + std.extVar('context').data.missing }", "line:column 2:"},
		"import":     {"local pw = '" + secret + "';\nimportstr '/etc/passwd'", `importstr "/etc/passwd"`},
		"timeout":    {"local pw = '" + secret + "';\nlocal f(n) = if n == 0 then 0 else 1 + f(n - 1);\nstd.foldl(function(a, i) a + std.foldl(function(b, j) b + f(400), std.range(1, 1000), 0), std.range(1, 100000), 0)", "did not finish within 1s"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderUserData(context.Background(), r, []byte(tc.tmpl), &machinev1.Machine{}, map[string][]byte{"userData": []byte("x")})
			var inv *invalidError
			if !errors.As(err, &inv) {
				t.Fatalf("error %T %v, want a spec error that fails the Machine", err, err)
			}
			if msg := err.Error(); strings.Contains(msg, secret) || !strings.Contains(msg, "userDataSecret") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q: must name userDataSecret and %q, and not quote the template", msg, tc.want)
			}
		})
	}
}

func TestCancelledRenderDoesNotFailTheMachine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := renderUserData(ctx, userdata.Default, []byte("'a' + 'b'"), &machinev1.Machine{}, nil)
	var inv *invalidError
	if err == nil || errors.As(err, &inv) {
		t.Errorf("got %v, want a plain error: the manager stopping is not the Machine's fault", err)
	}
}
