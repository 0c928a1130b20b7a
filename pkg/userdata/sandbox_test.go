package userdata

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spin never finishes and holds little memory: 10^8 calls that each
// recurse 400 deep, the stack unwinding between them.
const spin = `local f(n) = if n == 0 then 0 else 1 + f(n - 1);
std.foldl(function(a, i) a + std.foldl(function(b, j) b + f(400), std.range(1, 1000), 0), std.range(1, 100000), 0)`

func TestImportsAreRefused(t *testing.T) {
	for name, tc := range map[string]struct{ tmpl, want string }{
		"import":              {`import "/etc/passwd"`, `imports are not allowed in user data templates: import "/etc/passwd"`},
		"importstr":           {`{ pw: importstr "/etc/passwd" }`, `importstr "/etc/passwd"`},
		"importbin":           {`std.length(importbin "/etc/hostname")`, `importbin "/etc/hostname"`},
		"relative":            {`(import 'lib.libsonnet').x`, `import "lib.libsonnet"`},
		"never evaluated":     {`local unused = importstr '/etc/shadow'; 1 + 1`, `importstr "/etc/shadow"`},
		"branch not taken":    {`if std.length(std.extVar('context').data) > 100 then importstr '/etc/passwd' else 'x'`, `importstr "/etc/passwd"`},
		"in a nested closure": {`local f() = { a: [function(x) importstr '/proc/self/environ'] }; 'y'`, `importstr "/proc/self/environ"`},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := Default.Render(context.Background(), []byte(tc.tmpl), nil, map[string][]byte{"userData": []byte(tc.tmpl)})
			e := asError(t, err, KindImport)
			if !strings.Contains(e.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", e, tc.want)
			}
			if strings.Contains(e.Error(), "root:") || len(out) > 0 {
				t.Errorf("the file's content came back: %q, %q", out, e)
			}
		})
	}
}

func TestImporterRefusesWhatTheCheckMisses(t *testing.T) {
	// Past the static check: the VM's importer itself reads nothing.
	vm := newVM()
	for _, tmpl := range []string{`importstr "/etc/passwd"`, `import "/etc/passwd"`, `importbin "/etc/passwd"`} {
		out, err := vm.EvaluateAnonymousSnippet(templateName, tmpl)
		var refused *refusedImport
		if !errors.As(err, &refused) && !strings.Contains(errString(err), "imports are not allowed") {
			t.Errorf("%s: got %q, %v; want the import refused", tmpl, out, err)
		}
		if strings.Contains(out, "root:") || strings.Contains(errString(err), "root:") {
			t.Errorf("%s: the file was read", tmpl)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTraceWritesNowhere(t *testing.T) {
	const canary = "trace-canary-7c1f0e"
	tmpl := "std.trace('" + canary + "', 'traced')"

	// In process: what the VM would write goes nowhere, not to stderr.
	captured := captureStderr(t, func() {
		out, e := evaluate(tmpl, `{}`)
		if e != nil || out != "\"traced\"\n" {
			t.Errorf("got %q, %v", out, e)
		}
	})
	if strings.Contains(captured, canary) {
		t.Errorf("std.trace wrote to the process's stderr: %q", captured)
	}

	// Through the sandbox: nothing on its stderr either, and so nothing
	// the manager could pass on.
	var sandboxStderr string
	r := &Renderer{}
	r.finished = func(stderr string) { sandboxStderr = stderr }
	captured = captureStderr(t, func() {
		out, err := r.Render(context.Background(), []byte(tmpl), nil, nil)
		if err != nil || string(out) != "traced" {
			t.Errorf("got %q, %v", out, err)
		}
	})
	if strings.Contains(captured+sandboxStderr, canary) {
		t.Errorf("std.trace reached stderr: %q %q", captured, sandboxStderr)
	}
}

// captureStderr returns what f writes to os.Stderr.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = wr
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(rd)
		done <- string(b)
	}()
	defer func() { os.Stderr = saved }()
	f()
	os.Stderr = saved
	wr.Close()
	return <-done
}

// A render that times out is the sandbox's failure, not the template's
// word on itself: a sound template times out on a host starved of CPU.
func TestTemplateThatNeverFinishesTimesOut(t *testing.T) {
	r := &Renderer{Timeout: time.Second}
	_, err := r.Render(context.Background(), []byte(spin), nil, nil)
	e := asSandboxError(t, err, KindTimeout)
	if e.Error() != "the user data template did not finish within 1s" || e.Reason() != "timeout" {
		t.Errorf("message %q, reason %q", e, e.Reason())
	}
}

// A sandbox the kernel's OOM killer (or anyone) kills is not the template's
// fault either.
func TestKilledSandboxIsNotTheTemplatesFault(t *testing.T) {
	started := make(chan int, 1)
	r := &Renderer{Timeout: time.Hour, started: func(pid int) { started <- pid }}
	done := make(chan error, 1)
	go func() {
		_, err := r.Render(context.Background(), []byte(spin), nil, nil)
		done <- err
	}()
	if err := syscall.Kill(<-started, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := asSandboxError(t, <-done, KindSignal)
	if e.Error() != "the user data sandbox was killed by killed" || e.Reason() != "signal" {
		t.Errorf("message %q, reason %q", e, e.Reason())
	}
}

func TestOtherRendersProceedAndCancelKills(t *testing.T) {
	started := make(chan int, 4)
	r := &Renderer{Timeout: time.Hour, started: func(pid int) { started <- pid }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	spinning := make(chan result, 1)
	go func() {
		out, err := r.Render(ctx, []byte(spin), nil, nil)
		spinning <- result{out, err}
	}()
	pid := <-started

	// While the runaway template runs, another renders to the end.
	out, err := r.Render(context.Background(), []byte(`'ok-' + 'while-spinning'`), nil, nil)
	<-started
	if err != nil || string(out) != "ok-while-spinning" {
		t.Fatalf("second render: %q, %v", out, err)
	}
	select {
	case res := <-spinning:
		t.Fatalf("the runaway template ended on its own: %q, %v", res.out, res.err)
	default:
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the runaway sandbox %d is not running: %v", pid, err)
	}

	// The manager shutting down (its context ending) kills the sandbox.
	cancel()
	res := <-spinning
	var e *Error
	if !errors.Is(res.err, context.Canceled) || errors.As(res.err, &e) {
		t.Errorf("got %v, want the context's cancellation and no template error (the Machine is not at fault)", res.err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("sandbox %d still exists after Render returned: %v", pid, err)
	}
}

func TestConcurrencyIsBounded(t *testing.T) {
	started := make(chan int, 4)
	r := &Renderer{Timeout: time.Hour, MaxConcurrent: 1, started: func(pid int) { started <- pid }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := r.Render(ctx, []byte(spin), nil, nil)
		first <- err
	}()
	<-started
	// With the one slot taken, a second render waits and gives up with its
	// context, without starting a sandbox.
	waitCtx, waitCancel := context.WithCancel(context.Background())
	waitCancel()
	if _, err := r.Render(waitCtx, []byte(`'x' + 'y'`), nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("second render: %v, want it to wait for a slot until its context ended", err)
	}
	select {
	case pid := <-started:
		t.Errorf("a second sandbox %d started beyond MaxConcurrent", pid)
	default:
	}
	cancel()
	<-first
	// The slot is free again.
	if out, err := r.Render(context.Background(), []byte(`'x' + 'y'`), nil, nil); err != nil || string(out) != "xy" {
		t.Errorf("after the first ended: %q, %v", out, err)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	r := &Renderer{MemoryLimit: 64 << 20, Timeout: time.Minute}
	for name, tmpl := range map[string]string{
		// Many small objects: the watchdog sees the heap pass the limit.
		"gradual": `std.foldl(function(acc, x) acc + x.a, [{a: i, b: [i, i]} for i in std.range(1, 3000000)], 0)`,
		// One allocation of GiBs: the address space limit refuses it.
		"at once": `std.length(std.range(1, 300000000))`,
		"array":   `std.length(std.makeArray(2000000000, function(i) i))`,
		// A recursion as deep as memory allows: the stack is memory too.
		"stack": `local loop(n) = if n <= 0 then 0 else loop(n - 1) tailstrict; loop(1e12)`,
		// Strings doubling.
		"strings": `local grow(s, n) = if n == 0 then std.length(s) else grow(s + s, n - 1); grow('x', 40)`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Render(context.Background(), []byte(tmpl), nil, nil)
			e := asSandboxError(t, err, KindMemory)
			if e.Error() != "the user data template exceeded its memory limit of 64 MiB" {
				t.Errorf("message %q", e)
			}
		})
	}
}
