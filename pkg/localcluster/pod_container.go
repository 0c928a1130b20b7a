package localcluster

// One container of a pod run by RunPod: its root, its process, started
// again when it ends as restartPolicy Always says, and its probes.

import (
	"bytes"
	"context"
	"crypto/tls"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The kubelet's bounds of a FallbackToLogsOnError termination message.
const (
	tailLines = 80
	tailBytes = 2048
	// maxBackoff is the kubelet's longest wait before a restart; a
	// container that ran this long without ending starts over at the
	// first wait.
	maxBackoff = 5 * time.Minute
	// messageBytes bounds a termination-log file, as the kubelet does.
	messageBytes = 4096
)

type container struct {
	p       *Pod
	spec    *corev1.Container
	skipped bool
	binary  string // the image's binary on this machine
	path    string // where it is in the container's root
	root    string
	log     string

	// under p.mu
	running, started, ready bool
	restarts                int
	exits                   []Exit
	waiting                 string
	startedAt               time.Time
	cmd                     *exec.Cmd
	exited                  chan struct{} // closed when the current process has ended
	killReason              string
}

func (p *Pod) newContainer(spec *corev1.Container) (*container, error) {
	c := &container{p: p, spec: spec}
	dir, ok := p.o.Images[spec.Image]
	if !ok {
		c.skipped = true
		return c, nil
	}
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("container %s: the pod runner runs exactly the container's command, which it must have", spec.Name)
	}
	// A command that is a name, not a path, is looked up in the image's
	// PATH by the runtime; the images of OpenShift's operators have their
	// binaries in /usr/bin, the first of the PATH's directories they use.
	// argv[0] stays the name, as the runtime leaves it.
	c.path = spec.Command[0]
	if !filepath.IsAbs(c.path) {
		if strings.Contains(c.path, "/") {
			return nil, fmt.Errorf("container %s: the command %q is a relative path; the pod runner takes an absolute path or a name", spec.Name, c.path)
		}
		c.path = "/usr/bin/" + c.path
	}
	for _, pr := range []*corev1.Probe{spec.StartupProbe, spec.ReadinessProbe, spec.LivenessProbe} {
		if pr != nil && pr.HTTPGet == nil && pr.TCPSocket == nil {
			return nil, fmt.Errorf("container %s: only HTTP GET and TCP probes are supported", spec.Name)
		}
	}
	c.binary = filepath.Join(dir, filepath.FromSlash(spec.Command[0]))
	// The file itself, not a symlink to it, goes into the root (a link
	// to a symlink would point outside).
	if real, err := filepath.EvalSymlinks(c.binary); err == nil {
		c.binary = real
	}
	if err := checkStatic(c.binary); err != nil {
		return nil, fmt.Errorf("container %s (image %s): %w", spec.Name, spec.Image, err)
	}
	c.root = filepath.Join(p.dir, spec.Name, "root")
	c.log = filepath.Join(p.dir, spec.Name+".log")
	return c, nil
}

// checkStatic fails for a binary that is missing or needs a dynamic
// loader: the container's root has none.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("the image's binary %s: %w", path, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically; the container's root has no libraries: build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// makeRoot lays out the container's root: the binary at the command's
// path (/usr/bin/<name> for a name), the volume mounts, the service account files, /tmp and the
// termination-log file.
func (c *container) makeRoot(volumes map[string]volume) error {
	if err := os.RemoveAll(c.root); err != nil {
		return err
	}
	for _, d := range []string{"tmp", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(c.root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(c.root, "tmp"), 0o1777); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.root, "etc", "hostname"), []byte(c.p.Name+"\n"), 0o644); err != nil {
		return err
	}
	target := filepath.Join(c.root, filepath.FromSlash(c.path))
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if err := os.Link(c.binary, target); err != nil {
		if err := copyFile(c.binary, target); err != nil {
			return err
		}
	}
	hasSA := false
	for _, m := range c.spec.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return fmt.Errorf("mount %s: the pod has no volume %s", m.MountPath, m.Name)
		}
		if err := writeVolume(filepath.Join(c.root, filepath.FromSlash(m.MountPath)), v, m.SubPath); err != nil {
			return fmt.Errorf("mount %s: %w", m.MountPath, err)
		}
		hasSA = hasSA || m.MountPath == saDir
	}
	if !hasSA && (c.p.pod.Spec.AutomountServiceAccountToken == nil || *c.p.pod.Spec.AutomountServiceAccountToken) {
		v, err := c.p.serviceAccountVolume(context.Background())
		if err != nil {
			return err
		}
		if err := writeVolume(filepath.Join(c.root, filepath.FromSlash(saDir)), v, ""); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// terminationLog is the container's termination message file, in its root.
func (c *container) terminationLog() string {
	p := c.spec.TerminationMessagePath
	if p == "" {
		p = "/dev/termination-log"
	}
	return filepath.Join(c.root, filepath.FromSlash(p))
}

// supervise runs the container until ctx ends: starts it, waits for it to
// end (or be killed for a failed probe), and starts it again after the
// back-off as its pod's restart policy says.
func (c *container) supervise(ctx context.Context) {
	backoff := c.p.o.RestartBackoff
	everStarted := false
	for {
		ran, ok, started := c.runOnce(ctx, everStarted)
		everStarted = everStarted || started
		if ctx.Err() != nil || c.stopping() {
			return
		}
		wait := backoff
		switch {
		case !started:
			// not created (its config could not be made): tried
			// again, as the kubelet does, without counting a restart
			wait = 2 * time.Second
		default:
			policy := c.p.pod.Spec.RestartPolicy
			if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && ok) {
				return
			}
			if ran >= 2*maxBackoff {
				backoff, wait = c.p.o.RestartBackoff, c.p.o.RestartBackoff
			}
			c.setWaiting("CrashLoopBackOff: back-off " + wait.String() + " restarting the failed container")
			backoff = min(2*backoff, maxBackoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (c *container) stopping() bool {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.stopping
}

func (c *container) setWaiting(reason string) {
	c.p.mu.Lock()
	c.waiting = reason
	c.p.mu.Unlock()
	c.p.notify()
}

// runOnce starts the process and waits for it to end; it returns how long
// it ran, whether it ended with code 0, and whether it started at all (a
// start counts as a restart when an earlier one happened).
func (c *container) runOnce(ctx context.Context, restart bool) (time.Duration, bool, bool) {
	env, err := c.p.env(ctx, c.spec)
	if err != nil {
		c.setWaiting("CreateContainerConfigError: " + err.Error())
		c.p.o.Log.Info("container not started", "pod", c.p.Name, "container", c.spec.Name, "error", err.Error())
		return 0, false, false
	}
	lookup := func(k string) (string, bool) {
		for _, kv := range env {
			if name, v, _ := strings.Cut(kv, "="); name == k {
				return v, true
			}
		}
		return "", false
	}
	argv := make([]string, 0, len(c.spec.Command)+len(c.spec.Args))
	for _, a := range append(append([]string{}, c.spec.Command...), c.spec.Args...) {
		argv = append(argv, expand(a, lookup))
	}
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.setWaiting("RunContainerError: " + err.Error())
		return 0, false, false
	}
	defer logf.Close()
	if err := os.WriteFile(c.terminationLog(), nil, 0o666); err != nil {
		c.setWaiting("RunContainerError: " + err.Error())
		return 0, false, false
	}
	fmt.Fprintf(logf, "---- %s: started: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	tail, head := &tailBuffer{}, &headBuffer{}
	workDir := c.spec.WorkingDir
	if workDir == "" {
		workDir = "/"
	}
	cmd := &exec.Cmd{
		Path:   c.path,
		Args:   argv,
		Env:    env,
		Dir:    workDir,
		Stdout: io.MultiWriter(logf, tail, head),
		Stderr: io.MultiWriter(logf, tail, head),
	}
	cmd.SysProcAttr = sysProcAttr(c.root)
	started := time.Now()
	if restart {
		c.p.mu.Lock()
		c.restarts++
		c.p.mu.Unlock()
	}
	startCmd := cmd.Start
	if c.p.net != nil {
		startCmd = func() error { return c.p.net.do(cmd.Start) }
	}
	if err := startCmd(); err != nil {
		c.recordExit(Exit{Code: 128, Reason: "StartError", Message: err.Error(), At: time.Now()})
		return 0, false, true
	}
	exited := make(chan struct{})
	c.p.mu.Lock()
	c.cmd, c.exited, c.running, c.started, c.ready, c.waiting, c.startedAt, c.killReason = cmd, exited, true, false, false, "", started, ""
	c.p.mu.Unlock()
	c.p.notify()
	c.p.o.Log.Info("container started", "pod", c.p.Name, "container", c.spec.Name, "pid", cmd.Process.Pid)

	// a pod stopping while this one started: it ends too
	go func() {
		select {
		case <-ctx.Done():
			c.kill(5*time.Second, "Killed")
		case <-exited:
		}
	}()

	probeCtx, stopProbes := context.WithCancel(ctx)
	var probes sync.WaitGroup
	probes.Add(1)
	go func() {
		defer probes.Done()
		c.probe(probeCtx)
	}()
	waitErr := cmd.Wait()
	close(exited)
	stopProbes()
	probes.Wait()

	code := 0
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if waitErr != nil {
		code = 128
	}
	c.p.mu.Lock()
	reason := c.killReason
	c.p.mu.Unlock()
	if reason == "" {
		reason = "Completed"
		if code != 0 {
			reason = "Error"
		}
	}
	msg, _ := os.ReadFile(c.terminationLog())
	if len(msg) > messageBytes {
		msg = msg[len(msg)-messageBytes:]
	}
	if len(bytes.TrimSpace(msg)) == 0 && code != 0 && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = tail.tail()
	}
	fmt.Fprintf(logf, "---- %s: ended: exit code %d (%s)\n", time.Now().Format(time.RFC3339), code, reason)
	c.recordExit(Exit{Code: code, Reason: reason, Message: string(msg), Head: head.String(), At: time.Now()})
	return time.Since(started), code == 0, true
}

func (c *container) recordExit(e Exit) {
	c.p.mu.Lock()
	c.exits = append(c.exits, e)
	c.running, c.started, c.ready, c.cmd = false, false, false, nil
	c.p.mu.Unlock()
	c.p.notify()
	c.p.o.Log.Info("container ended", "pod", c.p.Name, "container", c.spec.Name, "exit", e.String())
}

// kill stops the running process, if any: SIGTERM to its process group,
// SIGKILL after grace. reason becomes its exit's reason.
func (c *container) kill(grace time.Duration, reason string) {
	c.p.mu.Lock()
	cmd, exited := c.cmd, c.exited
	if cmd != nil && c.killReason == "" {
		c.killReason = reason
	}
	c.p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// probe runs the container's probes as the kubelet does: the startup
// probe until it passes, then readiness and liveness, each on its period.
// A failed startup or liveness probe kills the process (the supervisor
// starts it again).
func (c *container) probe(ctx context.Context) {
	grace := 30 * time.Second
	if g := c.p.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if pr := c.spec.StartupProbe; pr != nil {
		if !c.runProbe(ctx, "startup", pr, func(bool) {}) {
			if ctx.Err() == nil {
				c.p.o.Log.Info("startup probe failed: killing the container", "pod", c.p.Name, "container", c.spec.Name)
				c.kill(grace, "Killed")
			}
			return
		}
	}
	c.p.mu.Lock()
	c.started = true
	if c.spec.ReadinessProbe == nil {
		c.ready = true
	}
	c.p.mu.Unlock()
	c.p.notify()
	var wg sync.WaitGroup
	if pr := c.spec.ReadinessProbe; pr != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runProbe(ctx, "readiness", pr, func(ok bool) {
				c.p.mu.Lock()
				changed := c.ready != ok
				c.ready = ok
				c.p.mu.Unlock()
				if changed {
					c.p.notify()
				}
			})
		}()
	}
	if pr := c.spec.LivenessProbe; pr != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !c.runProbe(ctx, "liveness", pr, func(bool) {}) && ctx.Err() == nil {
				c.p.o.Log.Info("liveness probe failed: killing the container", "pod", c.p.Name, "container", c.spec.Name)
				c.kill(grace, "Killed")
			}
		}()
	}
	wg.Wait()
}

// runProbe probes on pr's period and tells set each result that crosses
// a threshold. A startup probe returns true at its first success; every
// probe returns false once it has failed failureThreshold times in a row
// (readiness goes on probing: it only reports), or when ctx ends.
func (c *container) runProbe(ctx context.Context, kind string, pr *corev1.Probe, set func(bool)) bool {
	period := secondsOr(pr.PeriodSeconds, 10)
	timeout := secondsOr(pr.TimeoutSeconds, 1)
	successes, failures := int32(0), int32(0)
	successThreshold, failureThreshold := max(pr.SuccessThreshold, 1), max(pr.FailureThreshold, 1)
	if pr.FailureThreshold == 0 {
		failureThreshold = 3
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(secondsOr(pr.InitialDelaySeconds, 0)):
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		err := c.probeOnce(ctx, pr, timeout)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			failures = 0
			successes++
			if successes >= successThreshold {
				set(true)
				if kind == "startup" {
					return true
				}
			}
		} else {
			successes = 0
			failures++
			c.p.o.Log.V(1).Info("probe failed", "pod", c.p.Name, "container", c.spec.Name, "probe", kind, "error", err.Error())
			if failures >= failureThreshold {
				set(false)
				if kind != "readiness" {
					return false
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

func secondsOr(s, def int32) time.Duration {
	if s == 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}

// probeOnce is one HTTP GET (success: 200 to 399) or TCP connect.
func (c *container) probeOnce(ctx context.Context, pr *corev1.Probe, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		port, err := c.port(g.Port)
		if err != nil {
			return err
		}
		host := g.Host
		if host == "" {
			host = c.p.IP()
		}
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+g.Path, nil)
		if err != nil {
			return err
		}
		for _, h := range g.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		req.Header.Set("User-Agent", "kube-probe/1.34")
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true,
			DialContext: c.p.dialContext}}
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 10<<10))
		res.Body.Close()
		if res.StatusCode < 200 || res.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", res.StatusCode)
		}
		return nil
	case pr.TCPSocket != nil:
		port, err := c.port(pr.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := pr.TCPSocket.Host
		if host == "" {
			host = c.p.IP()
		}
		conn, err := c.p.dialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return errors.New("no probe handler")
}

// port resolves a probe's port, by number or by the container's port name.
func (c *container) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("the container has no port named %q", p.StrVal)
}

// statusLocked is the container's ContainerStatus.
func (c *container) statusLocked() ContainerStatus {
	s := ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, Skipped: c.skipped, Restarts: c.restarts, Exits: append([]Exit(nil), c.exits...), Waiting: c.waiting}
	if c.skipped {
		s.Running, s.Started, s.Ready = true, true, true
		return s
	}
	s.Running, s.Started, s.Ready = c.running, c.started, c.ready
	return s
}

// apiStatusLocked is the container's status as the kubelet reports it.
func (c *container) apiStatusLocked() corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, ImageID: "local://" + c.binary, RestartCount: int32(c.restarts)}
	if c.skipped {
		// no binary plays the image; reported running so that the pod
		// can get Ready (see RunPod)
		s.ImageID = "skipped://no-local-binary"
		s.Ready, s.Started = true, ptr.To(true)
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: c.p.startTime}
		return s
	}
	s.Ready, s.Started = c.ready, ptr.To(c.started)
	switch {
	case c.running:
		s.ContainerID = fmt.Sprintf("localcluster://%s/%s", c.p.Name, c.spec.Name)
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
	default:
		reason, msg, _ := strings.Cut(c.waiting, ": ")
		if reason == "" {
			reason = "ContainerCreating"
		}
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
	}
	if n := len(c.exits); n > 0 {
		e := c.exits[n-1]
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: int32(e.Code), Reason: e.Reason, Message: e.Message, FinishedAt: metav1.NewTime(e.At),
		}
	}
	return s
}

// tailBuffer keeps the end of a container's output.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 4*tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

// tail is the last tailLines lines, at most tailBytes bytes.
func (t *tailBuffer) tail() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > tailLines+1 {
		lines = lines[len(lines)-tailLines-1:]
	}
	return bytes.Join(lines, nil)
}

// sysProcAttr chroots the process into root, in a process group of its own
// (so that a kill reaches its children) that dies with the runner. Only
// root may chroot: anyone else gets a user namespace in which they are.
func sysProcAttr(root string) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Chroot: root, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		a.Cloneflags = syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	return a
}

// headBuffer keeps the start of a container's output: 5 lines, 1 KiB.
type headBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (h *headBuffer) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := 1024 - len(h.buf); room > 0 && bytes.Count(h.buf, []byte("\n")) < 5 {
		h.buf = append(h.buf, b[:min(len(b), room)]...)
	}
	return len(b), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	lines := bytes.SplitAfter(h.buf, []byte("\n"))
	return string(bytes.Join(lines[:min(len(lines), 5)], nil))
}
