package userdata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of a Renderer's limits.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultMemoryLimit    = 256 << 20
	DefaultMaxConcurrent  = 4
	DefaultMaxOutputBytes = 1 << 20
)

// Renderer renders user data, evaluating templates in a sandbox with the
// limits it holds. The zero value uses the defaults; a Renderer must not be
// copied after first use.
type Renderer struct {
	// Timeout bounds one evaluation's wall-clock time (and, as a backstop,
	// its CPU time).
	Timeout time.Duration
	// MemoryLimit bounds the memory a template may hold, in bytes.
	MemoryLimit int64
	// MaxConcurrent bounds how many templates are evaluated at once; more
	// renders wait their turn (or their context's end).
	MaxConcurrent int
	// MaxOutputBytes bounds the rendered user data. The cloud's own, lower
	// limit is checked where the cloud is known.
	MaxOutputBytes int

	once  sync.Once
	slots chan struct{}
	// started and finished, when set, learn the process ID of each sandbox
	// and what it wrote to stderr (tests).
	started  func(pid int)
	finished func(stderr string)
}

// Default is the renderer with the default limits.
var Default = &Renderer{}

func (r *Renderer) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

func (r *Renderer) memoryLimit() int64 {
	if r.MemoryLimit > 0 {
		return r.MemoryLimit
	}
	return DefaultMemoryLimit
}

func (r *Renderer) maxOutput() int {
	if r.MaxOutputBytes > 0 {
		return r.MaxOutputBytes
	}
	return DefaultMaxOutputBytes
}

func (r *Renderer) acquire(ctx context.Context) error {
	r.once.Do(func() {
		n := r.MaxConcurrent
		if n <= 0 {
			n = DefaultMaxConcurrent
		}
		r.slots = make(chan struct{}, n)
	})
	select {
	case r.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting to render the user data: %w", context.Cause(ctx))
	}
}

func (r *Renderer) release() { <-r.slots }

// Render returns the user data for machine: raw itself when it is JSON,
// else the result of raw as a Jsonnet template with
// std.extVar('context') = {machine: <the Machine>, data: {<key>: <value as
// a string>}, secrets: null}. A template yielding a string gives that
// string; anything else gives its JSON.
//
// A template at fault gives an *Error: its evaluation failed, the same on
// every attempt. A sandbox that ended without an answer (a timeout, memory,
// a signal, an exit status, a failed start) gives a *SandboxError, worth a
// retry: a sound template ends so on a host starved of CPU or memory. ctx
// ending gives its error.
func (r *Renderer) Render(ctx context.Context, raw []byte, machine any, secretData map[string][]byte) ([]byte, error) {
	return r.RenderContext(ctx, raw, Context{Machine: machine, Data: secretData})
}

// Context is what a template sees as std.extVar('context'), the context
// appuio's cloudscale.ch provider (v0.4.0, pkg/machine/actuator.go,
// jsonnetVMWithContext) gives its templates, so that theirs render here.
type Context struct {
	// Machine is the Machine (its JSON), as "machine".
	Machine any
	// Data are the user data secret's keys, each value a string, as "data".
	Data map[string][]byte
	// Secrets are the secrets a userDataSecretSelector picked, each as the
	// API has it (its data base64), as "secrets"; nil (no selector) gives
	// null, an empty list [].
	Secrets []any
}

// RenderContext is Render with the whole context: see Render.
func (r *Renderer) RenderContext(ctx context.Context, raw []byte, c Context) ([]byte, error) {
	if isJSON(raw) {
		return raw, nil
	}
	data := make(map[string]string, len(c.Data))
	for k, v := range c.Data {
		data[k] = string(v)
	}
	ctxJSON, err := json.Marshal(map[string]any{"machine": c.Machine, "data": data, "secrets": c.Secrets})
	if err != nil {
		return nil, fmt.Errorf("preparing the user data template's context: %w", err)
	}
	req, err := json.Marshal(request{Template: raw, Context: ctxJSON})
	if err != nil {
		return nil, fmt.Errorf("preparing the user data template's context: %w", err)
	}
	if len(req) > maxRequest {
		// The sandbox would refuse it on every attempt.
		return nil, &Error{Kind: KindInput, msg: fmt.Sprintf("the template and its context are %s, more than the %s a template may see (a selector picking many or large secrets?)",
			formatBytes(int64(len(req))), formatBytes(maxRequest))}
	}
	if err := r.acquire(ctx); err != nil {
		return nil, err
	}
	defer r.release()
	return r.sandbox(ctx, req)
}

// sandbox evaluates one request in a child process.
func (r *Renderer) sandbox(ctx context.Context, req []byte) ([]byte, error) {
	if !mainCalled.Load() {
		return nil, errors.New("cannot render a user data template: this binary does not call userdata.Main, which the template sandbox needs")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, startError("finding the executable for the user data sandbox: %v", err)
	}
	timeout := r.timeout()
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, exe, sandboxArg)
	// Nothing of the manager's environment (its API token) reaches the
	// sandbox; Go needs none of it.
	cmd.Env = []string{
		envSandbox + "=1",
		envMemory + "=" + strconv.FormatInt(r.memoryLimit(), 10),
		envCPU + "=" + strconv.FormatInt(int64(math.Ceil(timeout.Seconds()))+1, 10),
		envMaxOutput + "=" + strconv.Itoa(r.maxOutput()),
		// A crash prints its message only, no goroutine dump.
		"GOTRACEBACK=none",
		"GOMAXPROCS=1",
	}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(req)
	// The output comes base64-encoded in JSON: 4/3 of it, plus framing.
	stdout := &capped{max: r.maxOutput()/3*4 + 4<<10}
	stderr := &capped{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = sandboxAttr()
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, startError("starting the user data sandbox: %v", err)
	}
	if r.started != nil {
		r.started(cmd.Process.Pid)
	}
	err = cmd.Wait()
	if r.finished != nil {
		r.finished(stderr.String())
	}
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("rendering the user data: %w", context.Cause(ctx))
	case runCtx.Err() != nil:
		return nil, timeoutError(timeout)
	case err == nil:
		return decodeResponse(stdout)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return nil, startError("running the user data sandbox: %v", err)
	}
	return nil, r.classifyExit(exitErr, stderr.String(), timeout)
}

func decodeResponse(stdout *capped) ([]byte, error) {
	if stdout.overflow {
		return nil, startError("the user data sandbox answered more than it may")
	}
	var resp response
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, startError("the user data sandbox gave no answer: %v", err)
	}
	if resp.Error != nil {
		return nil, &Error{Kind: resp.Error.Kind, msg: resp.Error.Message}
	}
	if resp.Output == nil {
		return []byte{}, nil
	}
	return resp.Output, nil
}

// classifyExit says why the sandbox ended without an answer. stderr is
// read for the Go runtime's fatal error only: it is never passed on, as it
// may hold pieces of the template.
func (r *Renderer) classifyExit(e *exec.ExitError, stderr string, timeout time.Duration) error {
	ws, _ := e.Sys().(syscall.WaitStatus)
	switch {
	case ws.Exited() && ws.ExitStatus() == exitMemory:
		return memoryError(r.memoryLimit())
	case ws.Exited() && ws.ExitStatus() == 2 && runtimeOutOfMemory(stderr):
		return memoryError(r.memoryLimit())
	case ws.Exited() && (ws.ExitStatus() == exitSetup || ws.ExitStatus() == exitBadRequest):
		return startError("the user data sandbox could not start (exit status %d)", ws.ExitStatus())
	case ws.Signaled() && (ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU) && e.UserTime()+e.SystemTime() >= timeout:
		// RLIMIT_CPU: the template used its time on several threads.
		return timeoutError(timeout)
	case ws.Signaled():
		// The kernel's OOM killer, or someone's kill: not the template's
		// word on itself.
		return signalError(ws.Signal().String())
	}
	return exitError(ws.ExitStatus())
}

// runtimeOutOfMemory says whether the Go runtime died for want of memory:
// the heap or the address space exhausted (in -race builds the latter
// reads differently), or a goroutine's stack at its limit.
func runtimeOutOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "address space", "stack overflow", "stack exceeds"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// capped keeps the first max bytes written to it and drops the rest, so a
// sandbox writing without end costs the manager no memory.
type capped struct {
	bytes.Buffer
	max      int
	overflow bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room < len(p) {
		c.overflow = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
