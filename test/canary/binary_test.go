package canary_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/appuio/machine-api-provider/test/canary"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// The canaries: the manager's own token, a Machine's token, what a user
// data template and its secret hold, what a broken template holds, and
// what plain (JSON) user data holds. The Machine's token and the JSON user
// data's canary are random throughout: the emulator quotes pieces of them,
// and any piece found is a leak.
const (
	defaultToken   = "cnry-default-token-Hq83Lx01"
	machineToken   = "Vb27Qe95Lx3Tk8Wp4Zn6Rc1MjY"
	templateSecret = "cnry-in-template-Ja64Wn28"
	dataSecret     = "cnry-secret-key-Tz19Kc73"
	brokenSecret   = "cnry-broken-template-Pd55Rm40"
	inUserData     = "Hs6Jf1Gq8Pe3Ua9YtWd83Kq1"
)

var canaries = []string{defaultToken, machineToken, templateSecret, dataSecret, brokenSecret, inUserData}

// excerpted are the canaries the emulator quotes pieces of; minExcerpt is
// the shortest piece looked for.
var excerpted = []string{machineToken, inUserData}

const minExcerpt = 10

// echoUserData is plain user data whose excerpt the emulator quotes when it
// refuses the first create.
const echoUserData = `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core","passwordHash":"` + inUserData + `"}]}}`

// TestNoSecretAtAnyVerbosity runs the shipped binary, the manager at the
// highest verbosity its flags allow and the emulator with its access log,
// through a create, an update, a delete, two refused creates and a create
// the API refuses quoting a piece of its user data (after lists that fail
// quoting a piece of the token), and looks for the canaries, and for
// pieces of those quoted, in everything they wrote and in what the Machines
// show.
func TestNoSecretAtAnyVerbosity(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a control plane")
	}
	bin := buildBinary(t)
	e := fixture.Start(t, fixture.Options{})
	ctx := context.Background()

	state := filepath.Join(t.TempDir(), "cloudscale.json")
	// The first create (worker-echo's) is refused quoting its user data,
	// and lists fail quoting the token, more often than a read is retried.
	echoAt := strings.Index(echoUserData, inUserData) + 3
	emu := start(t, "emulator", bin, nil, "emulator", "cloudscale", "--listen", "127.0.0.1:0", "--boot-time", "0s",
		"--token", defaultToken, "--token", machineToken, "--state-file", state,
		"--fault", fmt.Sprintf("route=POST /v1/servers,errorRate=1,errorStatus=400,echo=userData,echoOffset=%d,echoLength=18,times=1", echoAt),
		"--fault", "route=GET /v1/servers,errorRate=1,errorStatus=503,echo=credentials,times=6")
	apiURL := emu.waitFor(t, "export CLOUDSCALE_API_URL=")

	for name, data := range map[string]map[string]string{
		"machine-token": {"token": machineToken},
		"user-data": {
			"userData": `local ctx = std.extVar('context');
{ ignition: { version: '3.4.0' }, passwd: { users: [{ name: 'core', passwordHash: '` + templateSecret + `' }] },
  storage: { files: [{ path: '/etc/key', contents: { source: 'data:,' + ctx.data.key } }] },
  hostname: ctx.machine.metadata.name }`,
			"key": dataSecret,
		},
		"broken-user-data": {"userData": "local pw = '" + brokenSecret + "';\n{ a: pw + std.extVar('context').data.missing }"},
		"import-user-data": {"userData": "local pw = '" + brokenSecret + "';\nimportstr '/etc/passwd'"},
		"echo-user-data":   {"userData": echoUserData},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fixture.Namespace}, StringData: data}
		if err := e.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	mgr := start(t, "manager", bin, []string{"CLOUDSCALE_API_TOKEN=" + defaultToken},
		"manager", "--kubeconfig", e.Kubeconfig(t), "--cloudscale-api-url", apiURL,
		"--namespace", fixture.Namespace, "--cluster-id", fixture.ClusterID, "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		// The highest the flags take: zap levels are int8.
		"--zap-log-level=127", "--zap-devel", "--zap-stacktrace-level=info")

	spec := func(userData string, tags map[string]string) string {
		b, _ := json.Marshal(map[string]any{
			"zone": "rma1", "flavor": "flex-8-4", "image": "custom:rhcos-4.19", "interfaces": []any{map[string]any{"type": "Public"}},
			"tokenSecret": map[string]string{"name": "machine-token"}, "userDataSecret": map[string]string{"name": userData},
			"tags": tags,
		})
		return string(b)
	}
	create := func(name, specJSON string) {
		if err := e.Client.Create(ctx, fixture.Machine(name, specJSON)); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *machinev1.Machine {
		m := &machinev1.Machine{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: fixture.Namespace, Name: name}, m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	// A create the API refuses, quoting its user data.
	create("worker-echo", spec("echo-user-data", nil))
	fixture.Eventually(t, 2*time.Minute, "worker-echo to fail", func() (bool, error) {
		m := get("worker-echo")
		return m.Status.ErrorMessage != nil, nil
	})

	// A create, with a token from a secret and a rendered template.
	create("worker-good", spec("user-data", map[string]string{"team": "a"}))
	fixture.Eventually(t, 2*time.Minute, "worker-good to get its server", func() (bool, error) {
		m := get("worker-good")
		return m.Spec.ProviderID != nil && m.Status.Phase != nil && *m.Status.Phase != "Provisioning", nil
	})
	// The canaries did go through: the server has the rendered user data.
	if ud := serverUserData(t, state); !strings.Contains(ud, templateSecret) || !strings.Contains(ud, dataSecret) {
		t.Fatalf("the server's user data lacks the template's canaries: %q", ud)
	}

	// Two refused creates: a template that fails, and one that imports.
	create("worker-broken", spec("broken-user-data", nil))
	create("worker-import", spec("import-user-data", nil))
	for _, name := range []string{"worker-broken", "worker-import"} {
		fixture.Eventually(t, 2*time.Minute, name+" to fail", func() (bool, error) {
			m := get(name)
			return m.Status.ErrorMessage != nil && strings.Contains(*m.Status.ErrorMessage, "userDataSecret"), nil
		})
	}

	// An update: the tags follow the spec.
	m := get("worker-good")
	m.Spec.ProviderSpec.Value.Raw = []byte(spec("user-data", map[string]string{"team": "b"}))
	if err := e.Client.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 2*time.Minute, "the server's tags to follow the spec", func() (bool, error) {
		return strings.Contains(serverTags(t, state), `"team":"b"`), nil
	})

	// What the Machines and their events show is scanned too, once the
	// failures' events (recorded after the Machines failed) are there.
	for _, name := range []string{"worker-broken", "worker-import", "worker-echo"} {
		e.AwaitEvent(t, name, "Warning ")
	}
	var shown strings.Builder
	for _, name := range []string{"worker-good", "worker-broken", "worker-import", "worker-echo"} {
		y, _ := yaml.Marshal(get(name))
		shown.Write(y)
		shown.WriteString(fixture.EventText(e.Events(t, name)))
	}

	// A delete of each.
	for _, name := range []string{"worker-good", "worker-broken", "worker-import", "worker-echo"} {
		if err := e.Client.Delete(ctx, get(name)); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Eventually(t, 2*time.Minute, "the Machines to be gone", func() (bool, error) {
		var list machinev1.MachineList
		err := e.Client.List(ctx, &list, client.InNamespace(fixture.Namespace))
		return err == nil && len(list.Items) == 0, err
	})

	mgrOut, emuOut := mgr.stop(t), emu.stop(t)
	// The logs are real: the manager logged at high verbosity, the
	// emulator each request.
	if !strings.Contains(mgrOut, "worker-good") || !strings.Contains(mgrOut, "Reconcile successful") {
		t.Errorf("the manager's log lacks the Machine or its V(5) lines (%d bytes)", len(mgrOut))
	}
	if !strings.Contains(emuOut, "POST /v1/servers 201") {
		t.Errorf("the emulator's access log lacks the create (%d bytes)", len(emuOut))
	}
	// The API did quote: the refused create and the failed lists.
	if !strings.Contains(emuOut, "POST /v1/servers 400") || !strings.Contains(emuOut, "GET /v1/servers 503") {
		t.Errorf("the emulator's access log lacks the echoing answers")
	}
	for what, text := range map[string]string{"manager output": mgrOut, "emulator output": emuOut, "Machines and events": shown.String()} {
		if found := canary.Scan(text, canaries...); len(found) > 0 {
			t.Errorf("%s (%d bytes) holds secrets: %v", what, len(text), found)
		}
		if found := canary.ScanExcerpts(text, minExcerpt, excerpted...); len(found) > 0 {
			t.Errorf("%s (%d bytes) holds pieces of secrets: %v", what, len(text), found)
		}
	}
	t.Logf("scanned %d bytes of manager output and %d of emulator output", len(mgrOut), len(emuOut))
}

// buildBinary builds the shipped binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "machine-api-provider")
	cmd := exec.Command(goBin, "build", "-o", bin, "../../cmd/machine-api-provider")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is a subcommand of the binary, its output captured.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func start(t *testing.T, name, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan error, 1)}
	// Only what the test gives: no token of the developer's environment.
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitFor returns the rest of the first output line that starts with prefix.
func (p *process) waitFor(t *testing.T, prefix string) string {
	t.Helper()
	var rest string
	fixture.Eventually(t, time.Minute, p.name+" to say "+prefix, func() (bool, error) {
		sc := bufio.NewScanner(strings.NewReader(p.out.String()))
		for sc.Scan() {
			if after, found := strings.CutPrefix(strings.TrimSpace(sc.Text()), prefix); found {
				rest = after
				return true, nil
			}
		}
		return false, fmt.Errorf("output so far: %.2000s", p.out.String())
	})
	return rest
}

// stop ends the process as a Deployment would (SIGTERM) and returns all it
// wrote.
func (p *process) stop(t *testing.T) string {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop on SIGTERM", p.name)
	}
	return p.out.String()
}

// serverUserData is the user data of the emulator's servers, from its state.
func serverUserData(t *testing.T, state string) string {
	t.Helper()
	var s struct {
		Servers map[string]struct {
			UserData string `json:"user_data"`
		} `json:"servers"`
	}
	readState(t, state, &s)
	var b strings.Builder
	for _, srv := range s.Servers {
		b.WriteString(srv.UserData)
	}
	return b.String()
}

func serverTags(t *testing.T, state string) string {
	t.Helper()
	var s struct {
		Servers map[string]struct {
			Tags map[string]string `json:"tags"`
		} `json:"servers"`
	}
	readState(t, state, &s)
	b, _ := json.Marshal(s.Servers)
	return string(b)
}

func readState(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("emulator state: %v", err)
	}
}
