package actuator

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	machinecontroller "github.com/openshift/machine-api-operator/pkg/controller/machine"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/metrics"
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
	got, err := renderUserData(context.Background(), userdata.Default, ign, userdata.Context{Machine: &machinev1.Machine{}})
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
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderUserData(context.Background(), r, []byte(tc.tmpl), userdata.Context{Machine: &machinev1.Machine{}, Data: map[string][]byte{"userData": []byte("x")}})
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
	_, err := renderUserData(ctx, userdata.Default, []byte("'a' + 'b'"), userdata.Context{Machine: &machinev1.Machine{}})
	var inv *invalidError
	if err == nil || errors.As(err, &inv) {
		t.Errorf("got %v, want a plain error: the manager stopping is not the Machine's fault", err)
	}
}

// TestSandboxFailuresAreRetried: a render whose sandbox ends without an
// answer (here a timeout, as under CPU starvation) does not fail the
// Machine: it is retried after the Machine's backoff, with an event that
// names the user data secret and the reason, and a metric.
func TestSandboxFailuresAreRetried(t *testing.T) {
	const secret = "s3cr3t-passw0rd-in-template"
	tmpl := "local pw = '" + secret + "';\nlocal f(n) = if n == 0 then 0 else 1 + f(n - 1);\nstd.foldl(function(a, i) a + std.foldl(function(b, j) b + f(400), std.range(1, 1000), 0), std.range(1, 100000), 0)"
	_, err := renderUserData(context.Background(), &userdata.Renderer{Timeout: time.Second}, []byte(tmpl), userdata.Context{Machine: &machinev1.Machine{}})
	var inv *invalidError
	var sandbox *userdata.SandboxError
	if errors.As(err, &inv) || !errors.As(err, &sandbox) || sandbox.Kind != userdata.KindTimeout {
		t.Fatalf("a render that timed out: %T %v, want a *userdata.SandboxError and no spec error", err, err)
	}
	rec := record.NewFakeRecorder(10)
	a := &Actuator{cloud: cscloud.New(cscloud.Options{}), recorder: rec, log: logr.Discard(), now: time.Now}
	m := &machinev1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", UID: "uid-a"}}
	before := counted(renderFailures("timeout"))
	got := a.fail(context.Background(), m, "FailedCreate", err)
	if isInvalid(got) {
		t.Fatalf("fail(%v) = %v: the Machine would go Failed", err, got)
	}
	var requeue *machinecontroller.RequeueAfterError
	if !errors.As(got, &requeue) || requeue.RequeueAfter < backoffMin {
		t.Fatalf("fail(%v) = %v, want a requeue after the Machine's backoff", err, got)
	}
	if held := a.backoff.held(m.UID, a.now()); held == nil {
		t.Error("an early reconcile is not held back")
	}
	ev := <-rec.Events
	if !strings.Contains(ev, "UserDataRenderFailed") || !strings.Contains(ev, "userDataSecret") || !strings.Contains(ev, "did not finish within 1s") || strings.Contains(ev, secret) {
		t.Errorf("event %q: must name the secret field and the reason, and not quote the template", ev)
	}
	if d := counted(renderFailures("timeout")) - before; d != 1 {
		t.Errorf("the render failure counted %v times", d)
	}
}

func renderFailures(reason string) prometheus.Counter {
	return metrics.UserDataRenderFailures("cloudscale", reason)
}

func counted(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
